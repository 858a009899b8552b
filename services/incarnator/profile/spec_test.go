package profile

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
)

// The spec's own examples, section by section.

func TestSpecSimplestProfile(t *testing.T) {
	// §1: "Simplest (and almost useless) example".
	set := mustSet(t, map[string]string{
		"base.xml": profileXML("linux", "", `<osp:UspaceRoot>/tmp/base</osp:UspaceRoot>`+requiredTemplates()),
		"my.xml": `<osp:Profile
    xmlns:osp="http://gpe.intel.com/osprs/profile"
    name="my-linux"
    extends="linux">
  <osp:UspaceRoot>/var/tmp/gpe/uspaces</osp:UspaceRoot>
  <osp:Delimiter>/</osp:Delimiter>
</osp:Profile>`,
	})
	p, ok := set.Profile("my-linux")
	if !ok {
		t.Fatal("my-linux not loaded")
	}
	if p.UspaceRoot != "/var/tmp/gpe/uspaces" || p.Delimiter != "/" || p.Extends != "linux" {
		t.Errorf("got root %q delim %q extends %q", p.UspaceRoot, p.Delimiter, p.Extends)
	}
	if p.Template("START") == nil {
		t.Error("my-linux does not inherit START from linux")
	}
	if !set.Abstract("linux") || set.Abstract("my-linux") {
		t.Error("linux is extended, my-linux is not")
	}
}

func TestSpecTwoLevelReplacement(t *testing.T) {
	// §2.1: cp <SOURCE> <DESTINATION/\.log/> with x.log and y.log gives "cp x.log y".
	got := expand(t, `cp <SOURCE> <DESTINATION/\.log/>`, map[string]Value{
		"SOURCE": {Text: "x.log", Trusted: true}, "DESTINATION": {Text: "y.log", Trusted: true}})
	if got != "cp x.log y" {
		t.Errorf("got %q", got)
	}
	// The same with job (untrusted) values: quoted words, same bytes for safe values.
	got = expand(t, `cp <SOURCE> <DESTINATION/\.log/>`, map[string]Value{
		"SOURCE": {Text: "x.log"}, "DESTINATION": {Text: "my y.log"}})
	if got != `cp x.log 'my y'` {
		t.Errorf("got %q", got)
	}
}

func TestSpecHelloTemplate(t *testing.T) {
	// §2.4: the Hello template, its TEXT field fixed to "Hello".
	p := mustParse(t, profileXML("hello", "", `
<idb:Template name="Hello" xmlns:idb="http://gpe.intel.com/idb">
  <idb:Description>Sample Hello script template</idb:Description>
  <idb:Invocation name=""><idb:Body><![CDATA[echo <TEXT>]]></idb:Body></idb:Invocation>
  <idb:Field name="TEXT">
    <idb:Value>Hello</idb:Value>
  </idb:Field>
</idb:Template>`))
	tm := p.Template("Hello")
	if tm.Description != "Sample Hello script template" {
		t.Errorf("description %q", tm.Description)
	}
	for _, job := range []map[string]string{nil, {"TEXT": "Goodbye"}} {
		out, err := tm.ExpandInvocation(tm.Invocation(""), Sources{Job: lookup(job)}, nil)
		if err != nil || string(out) != "echo Hello" {
			t.Errorf("job %v: got %q, %v; the fixed value overrides everything", job, out, err)
		}
	}
}

func TestSpecInvocationVariationsAndStaticScripts(t *testing.T) {
	// §2.2: variations by name; BIN's "", STATIC_SCRIPT and RUN_STATIC_SCRIPT; a
	// StaticScript with fileName and arguments.
	p := mustParse(t, profileXML("s", "", `
<Template name="BIN">
  <Invocation name=""><Body>/home/&lt;USER_NAME&gt;/bin</Body></Invocation>
  <Invocation name="STATIC_SCRIPT"><Body><![CDATA[/home/<USER_NAME>/bin/<FILE_NAME>]]></Body></Invocation>
  <Invocation name="RUN_STATIC_SCRIPT"><Description>runs one</Description><Body><![CDATA[/bin/sh <TARGET> <ARGUMENTS>]]></Body></Invocation>
</Template>
<Template name="RUN">
  <Invocation name=""><Body>run <![CDATA[<MODE>]]></Body></Invocation>
  <Invocation name="DEBUG"><Body><![CDATA[gdb --args run <MODE>]]></Body></Invocation>
  <Invocation name="STATIC"><StaticScript fileName="lister" arguments="-l &lt;DIR&gt;"><![CDATA[
#!/bin/sh
ls "$@"
]]></StaticScript></Invocation>
</Template>`))
	run := p.Template("RUN")
	if len(run.Invocations) != 3 || run.Invocation("DEBUG") == nil {
		t.Fatalf("variations: %+v", run.Invocations)
	}
	src := Sources{Job: lookup(map[string]string{"MODE": "fast", "DIR": "my dir"})}
	out, _ := run.ExpandInvocation(run.Invocation("DEBUG"), src, nil)
	if string(out) != "gdb --args run fast" {
		t.Errorf("DEBUG: %q", out)
	}
	st := run.Invocation("STATIC").Static
	if st.FileName != "lister" || st.Content != "#!/bin/sh\nls \"$@\"\n" {
		t.Errorf("static script %q %q", st.FileName, st.Content)
	}
	args, err := run.ExpandText(st.Arguments, src, nil)
	if err != nil || string(args) != "-l 'my dir'" {
		t.Errorf("arguments %q %v", args, err)
	}
	bin := p.Template("BIN")
	if bin.Invocation("RUN_STATIC_SCRIPT").Description != "runs one" {
		t.Error("invocation description lost")
	}
}

func TestSpecStoragesAndApplications(t *testing.T) {
	// §3 and §4.
	p := mustParse(t, profileXML("a", "", `
<Template name="HOME"><Invocation><Body>/home/&lt;USER_NAME&gt;</Body></Invocation></Template>
<Storage name="HOME" template="HOME"/>
<Template name="POVRAY"><Invocation><Body>povray &lt;INPUT&gt;</Body></Invocation></Template>
<Application name="povray-3.6" template="POVRAY">
  <ApplicationName>POVRay</ApplicationName>
  <ApplicationVersion>3.6</ApplicationVersion>
  <Description>ray tracer</Description>
</Application>`))
	if len(p.Storages) != 1 || p.Storages[0].Name != "HOME" || p.Storages[0].Template != "HOME" {
		t.Errorf("storages %+v", p.Storages)
	}
	a, ok := p.Application("POVRay", "3.6")
	if !ok || a.Template != "POVRAY" || a.Description != "ray tracer" || a.Name != "povray-3.6" {
		t.Errorf("application %+v %v", a, ok)
	}
	if _, ok := p.Application("POVRay", "3.7"); ok {
		t.Error("version 3.7 matched 3.6")
	}
	if _, ok := p.Application("POVRay", ""); !ok {
		t.Error("no version should match any")
	}
	// The invocation with no name attribute is the default variation "".
	if p.Template("HOME").Invocation("") == nil {
		t.Error("unnamed invocation is not the default")
	}
}

func TestFieldsFull(t *testing.T) {
	// §2.3: Description, Min, Max, Tag, Default, Value, isSettable.
	p := mustParse(t, profileXML("f", "", `
<Template name="CC">
  <Invocation><Body><![CDATA[cc <OPT> -j <JOBS> <SRC> <MODE>]]></Body></Invocation>
  <Field name="OPT"><Description>optimisation</Description>
    <Tag name="fast">-O3 -funroll-loops</Tag><Tag name="debug">-O0 -g</Tag><Default>debug</Default></Field>
  <Field name="JOBS"><Min>1</Min><Max>16</Max><Default>4</Default></Field>
  <Field name="SRC" isSettable="true"/>
  <Field name="MODE" isSettable="false"><Default>plain</Default></Field>
</Template>`))
	cc := p.Template("CC")
	f := cc.Field("OPT")
	if f.Description != "optimisation" || len(f.Tags) != 2 || *f.Default != "debug" {
		t.Errorf("field OPT %+v", f)
	}
	cases := []struct {
		job  map[string]string
		want string
		err  string
	}{
		{map[string]string{"SRC": "a.c"}, "cc -O0 -g -j 4 a.c plain", ""},
		{map[string]string{"SRC": "a b.c", "OPT": "fast", "JOBS": "16"}, "cc -O3 -funroll-loops -j 16 'a b.c' plain", ""},
		{map[string]string{"SRC": "a.c", "OPT": "-O1; rm -rf ~"}, "cc '-O1; rm -rf ~' -j 4 a.c plain", ""},
		{map[string]string{"SRC": "a.c", "JOBS": "17"}, "", `template CC: field JOBS: value "17" is out of range (limits 1..16)`},
		{map[string]string{"SRC": "a.c", "JOBS": "0.5"}, "", `template CC: field JOBS: value "0.5" is out of range (limits 1..16)`},
		{map[string]string{"SRC": "a.c", "JOBS": "many"}, "", `template CC: field JOBS: value "many" is not a number (limits 1..16)`},
		{map[string]string{"SRC": "a.c", "MODE": "x"}, "", `template CC: field MODE: value "x" is set by the job, but the field is not settable`},
		{nil, "", `template CC: field SRC: has no value: the job does not set it and the profile gives no default`},
	}
	for _, c := range cases {
		out, err := cc.ExpandInvocation(cc.Invocation(""), Sources{Job: lookup(c.job)}, nil)
		if c.err != "" {
			if err == nil || err.Error() != c.err || !errors.Is(err, ErrField) {
				t.Errorf("job %v: err %v, want %q", c.job, err, c.err)
			}
			continue
		}
		if err != nil || string(out) != c.want {
			t.Errorf("job %v: got %q, %v; want %q", c.job, out, err, c.want)
		}
	}
}

func TestPrecedence(t *testing.T) {
	// fixed > special > operator > job > default
	p := mustParse(t, profileXML("f", "", `
<Template name="T">
  <Invocation><Body><![CDATA[<A> <B> <C> <D> <E>]]></Body></Invocation>
  <Field name="A"><Value>fixed</Value></Field>
  <Field name="E"><Default>dflt</Default></Field>
</Template>`))
	tm := p.Template("T")
	all := map[string]string{"A": "j", "B": "j", "C": "j", "D": "j"}
	src := Sources{
		Special:  func(n string) (Value, bool) { return Value{Text: "special", Trusted: true}, n == "A" || n == "B" },
		Operator: func(n string) (string, bool) { return "operator", n == "B" || n == "C" },
		Job:      lookup(all),
	}
	out, err := tm.ExpandInvocation(tm.Invocation(""), src, nil)
	if err != nil || string(out) != "fixed special operator j dflt" {
		t.Errorf("got %q %v", out, err)
	}
}

func TestHierarchyOverrides(t *testing.T) {
	files := map[string]string{
		"a.xml": profileXML("base", "", `<UspaceRoot>/base</UspaceRoot><Delimiter>/</Delimiter>`+requiredTemplates()+`
<Template name="HOME"><Invocation><Body>/home/base</Body></Invocation><Field name="X"><Default>1</Default></Field></Template>
<Template name="ONLYBASE"><Invocation><Body>b</Body></Invocation></Template>
<Storage name="HOME" template="HOME"/>
<Application name="app" template="ONLYBASE"><ApplicationName>App</ApplicationName><ApplicationVersion>1</ApplicationVersion></Application>`),
		"b.xml": profileXML("mid", "base", `<UspaceRoot>/mid</UspaceRoot>
<Template name="HOME"><Invocation name="OTHER"><Body>/home/mid</Body></Invocation></Template>
<Template name="NEW"><Invocation><Body>n</Body></Invocation></Template>
<Application name="app" template="NEW"><ApplicationName>App</ApplicationName><ApplicationVersion>2</ApplicationVersion></Application>`),
		"c.xml": profileXML("leaf", "mid", `<Delimiter>\</Delimiter>
<Template name="START"><Invocation><Body>leafstart</Body></Invocation></Template>`),
	}
	set := mustSet(t, files)
	leaf, _ := set.Profile("leaf")
	if leaf.UspaceRoot != "/mid" || leaf.Delimiter != `\` {
		t.Errorf("root %q delim %q", leaf.UspaceRoot, leaf.Delimiter)
	}
	// A child's template replaces the parent's whole: HOME has only mid's variation and
	// none of base's fields.
	home := leaf.Template("HOME")
	if home.Invocation("") != nil || home.Invocation("OTHER") == nil || home.Field("X") != nil {
		t.Errorf("HOME was merged, not replaced: %+v", home)
	}
	if got := leaf.Template("START").Invocation("").Body.Source; got != "leafstart" {
		t.Errorf("START %q", got)
	}
	if leaf.Template("ONLYBASE") == nil || leaf.Template("NEW") == nil {
		t.Error("inherited or added templates missing")
	}
	if a, _ := leaf.Application("App", ""); a.AppVersion != "2" || a.Template != "NEW" {
		t.Errorf("application not overridden by name: %+v", a)
	}
	if len(leaf.Storages) != 1 {
		t.Errorf("storages %+v", leaf.Storages)
	}
	// The parent is untouched by its child.
	base, _ := set.Profile("base")
	if base.Template("HOME").Invocation("") == nil || base.UspaceRoot != "/base" {
		t.Error("resolving the child changed the parent")
	}
	if set.Hash == "" || !strings.HasPrefix(set.Hash, "sha256:") {
		t.Errorf("hash %q", set.Hash)
	}
}

func TestSetHashFollowsContent(t *testing.T) {
	files := map[string]string{"a.xml": profileXML("a", "", requiredTemplates())}
	h1 := mustSet(t, files).Hash
	files["a.xml"] += "\n"
	if h2 := mustSet(t, files).Hash; h1 == h2 {
		t.Error("a changed file left the hash unchanged")
	}
}

// helpers

func profileXML(name, extends, body string) string {
	ext := ""
	if extends != "" {
		ext = ` extends="` + extends + `"`
	}
	return `<?xml version="1.0"?>
<osp:Profile xmlns:osp="http://gpe.intel.com/osprs/profile" xmlns="http://gpe.intel.com/idb" name="` + name + `"` + ext + `>` + body + `
</osp:Profile>
`
}

func requiredTemplates() string {
	var b strings.Builder
	for _, r := range Required {
		b.WriteString(`<Template name="` + r.Template + `">`)
		for _, v := range r.Invocations {
			b.WriteString(`<Invocation name="` + v + `"><Body>` + strings.ToLower(r.Template) + `</Body></Invocation>`)
		}
		b.WriteString("</Template>\n")
	}
	return b.String()
}

func mustParse(t *testing.T, src string) *Profile {
	t.Helper()
	p, err := Parse("test.xml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustSet(t *testing.T, files map[string]string) *Set {
	t.Helper()
	set, err := loadMap(files)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func loadMap(files map[string]string) (*Set, error) {
	fsys := fstest.MapFS{}
	for name, body := range files {
		fsys["p/"+name] = &fstest.MapFile{Data: []byte(body)}
	}
	return LoadFS(fsys, "p", "profiles")
}

func lookup(m map[string]string) func(string) (string, bool) {
	return func(n string) (string, bool) {
		v, ok := m[n]
		return v, ok
	}
}

func expand(t *testing.T, src string, vals map[string]Value) string {
	t.Helper()
	txt, err := ParseText(src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := txt.AppendExpand(nil, func(n string) (Value, error) {
		v, ok := vals[n]
		if !ok {
			return Value{}, errors.New("no " + n)
		}
		return v, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
