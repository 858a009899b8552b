package profile

import (
	"strings"
	"testing"
)

// Min/Max: limits and defaults are plain decimal numbers; a default outside the limits
// is refused when the profile is read.
func TestMinMaxAtLoad(t *testing.T) {
	field := func(kids string) string {
		return "<Profile name=\"x\"><Template name=\"T\"><Invocation><Body>&lt;N&gt;</Body></Invocation>\n<Field name=\"N\">" + kids + "</Field></Template></Profile>"
	}
	for kids, want := range map[string]string{
		"<Min>NaN</Min>": `Min: "NaN" is not a plain decimal number`,
		"<Max>1e1</Max>": `Max: "1e1" is not a plain decimal number`,
		"<Min>1</Min><Max>8</Max><Default>9</Default>": `Field/Default: "9" is outside the limits of field N (limits 1..8)`,
		"<Min>1</Min><Default>0x10</Default>":          `Field/Default: "0x10" is not a plain decimal number`,
	} {
		_, err := Parse("test.xml", []byte(field(kids)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %s", kids, err, want)
		}
	}
	for _, ok := range []string{"<Min>-1.5</Min><Max>8</Max><Default>2</Default>", "<Max>8</Max><Default>big</Default><Tag name=\"big\">8</Tag>"} {
		if _, err := Parse("test.xml", []byte(field(ok))); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// One rule for every value source: the job's and the operator's (and a user profile's,
// which reaches templates as the operator's) values are mapped through tags and checked
// against the limits; NaN and 1e1 are not numbers.
func TestMinMaxAndTagsForEverySource(t *testing.T) {
	p := mustParse(t, "<Profile name=\"x\"><Template name=\"T\"><Invocation><Body>&lt;N&gt;</Body></Invocation>\n"+
		"<Field name=\"N\"><Min>1</Min><Max>8</Max><Tag name=\"most\">8</Tag></Field></Template></Profile>")
	tmpl := p.Template("T")
	from := func(op, job string) Sources {
		src := Sources{}
		if op != "" {
			src.Operator = func(string) (string, bool) { return op, true }
		}
		if job != "" {
			src.Job = func(string) (string, bool) { return job, true }
		}
		return src
	}
	for _, c := range []struct{ op, job, want, err string }{
		{"", "NaN", "", "is not a number"},
		{"", "1e1", "", "is not a number"},
		{"", "9", "", "is out of range"},
		{"", "most", "8", ""},
		{"9", "", "", "is out of range"},
		{"NaN", "", "", "is not a number"},
		{"most", "", "8", ""},
		{"4", "", "4", ""},
	} {
		v, err := tmpl.Resolve("N", from(c.op, c.job))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("operator %q job %q: got %+v %v, want %s", c.op, c.job, v, err, c.err)
			}
			continue
		}
		if err != nil || v.Text != c.want {
			t.Errorf("operator %q job %q: got %+v %v, want %s", c.op, c.job, v, err, c.want)
		}
	}
}
