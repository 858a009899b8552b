package ingest

import (
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// TestRequirementsAreCanonical: each language's resource vocabulary, units and LRMS
// default come out of ingest in the gateway's terms, so the incarnator needs none of it.
func TestRequirementsAreCanonical(t *testing.T) {
	parse := func(t *testing.T, format, doc string) events.Requirements {
		t.Helper()
		jobs, err := Parse("doc", []byte(doc), ParseOptions{Format: format})
		if err != nil {
			t.Fatal(err)
		}
		return jobs[len(jobs)-1].Requirements
	}
	t.Run("v3 fork rule", func(t *testing.T) {
		for _, c := range []struct {
			reqs        string
			wantDefault events.LRMSDefault
			wantRule    events.LRMSRule
		}{
			{``, events.LRMSBatch, events.LRMSRule{}},
			{`,"requirements":{"queue":"q"}`, events.LRMSBatch, events.LRMSRule{}},
			{`,"requirements":{"fork":true}`, events.LRMSAny, events.LRMSRule{}},
			{`,"requirements":{"fork":false}`, events.LRMSUnsaid, events.LRMSRule{IsNot: "Fork"}},
			{`,"requirements":{"lrms":"PBS","fork":false}`, events.LRMSUnsaid, events.LRMSRule{Is: "PBS"}},
			{`,"requirements":{"lrms":"Fork"}`, events.LRMSUnsaid, events.LRMSRule{Is: "Fork"}},
		} {
			r := parse(t, FormatV3JSON, `{"version":3,"executable":"x"`+c.reqs+`}`)
			var rule events.LRMSRule
			if len(r.LRMS) == 1 {
				rule = r.LRMS[0]
				rule.From = events.Origin{}
			}
			if r.LRMSDefault != c.wantDefault || rule != c.wantRule || len(r.LRMS) > 1 {
				t.Errorf("%s: default %q rules %+v, want %q %+v", c.reqs, r.LRMSDefault, r.LRMS, c.wantDefault, c.wantRule)
			}
		}
	})
	t.Run("v3 origins", func(t *testing.T) {
		r := parse(t, FormatV3YAML, "version: 3\nexecutable: x\nrequirements:\n  hostname: [a, 'b*']\n  ram_size: 2048\n")
		if len(r.Hosts) != 1 || len(r.Hosts[0].AnyOf) != 2 || r.Hosts[0].AnyOf[1].Pattern != "b*" ||
			r.Hosts[0].From != (events.Origin{Field: "requirements.hostname", Line: 4, Col: 13}) {
			t.Errorf("hosts %+v", r.Hosts)
		}
		if r.RAMSize != 2048 || r.Origin("ram_size").Line != 5 {
			t.Errorf("ram_size %d from %+v", r.RAMSize, r.Origin("ram_size"))
		}
	})
	t.Run("JRDL units and names", func(t *testing.T) {
		r := parse(t, FormatJRDL, `<jrdl><job><executable><path><stringElement value="x"/></path></executable>
<jobManagerType><enumeration><enumerationValue><pbs/></enumerationValue></enumeration></jobManagerType>
<resource><processor><clockSpeed><integer value="2000"/></clockSpeed></processor>
<minMainMemory><minRAMSize><integer value="512"/></minRAMSize><minRAMAvailable><integer value="64"/></minRAMAvailable></minMainMemory>
<schedulingType><string><stringElement value="fork"/></string></schedulingType></resource></job></jrdl>`)
		if r.CPUHz != 2_000_000_000 || r.RAMSize != 512 {
			t.Errorf("cpu_hz %d ram_size %d, want hertz and megabytes", r.CPUHz, r.RAMSize)
		}
		if len(r.Attributes) != 1 || r.Attributes[0].Name != "ram_available" || *r.Attributes[0].AtLeast != 64 ||
			r.Attributes[0].From.Field != "job[0]/resource/minMainMemory/minRAMAvailable" || r.Attributes[0].From.Line != 4 {
			t.Errorf("attributes %+v", r.Attributes)
		}
		if len(r.LRMS) != 2 || r.LRMS[0].Is != "pbs" || r.LRMS[1].Is != "Fork" || r.LRMSDefault != events.LRMSUnsaid {
			t.Errorf("lrms %+v default %q", r.LRMS, r.LRMSDefault)
		}
	})
	t.Run("JRDL subjob overrides its job's rule", func(t *testing.T) {
		r := parse(t, FormatJRDL, `<jrdl><job><executable><path><stringElement value="x"/></path></executable>
<jobManagerType><enumeration><enumerationValue><pbs/></enumerationValue></enumeration></jobManagerType>
<subjob><jobManagerType><enumeration><enumerationValue><fork/></enumerationValue></enumeration></jobManagerType></subjob>
<subjob/></job></jrdl>`)
		if len(r.LRMS) != 1 || r.LRMS[0].Is != "pbs" {
			t.Errorf("the second subjob's rules %+v, want its job's pbs alone", r.LRMS)
		}
		jobs, _ := Parse("doc", []byte(`<jrdl><job><executable><path><stringElement value="x"/></path></executable>
<jobManagerType><enumeration><enumerationValue><pbs/></enumerationValue></enumeration></jobManagerType>
<subjob><jobManagerType><enumeration><enumerationValue><fork/></enumerationValue></enumeration></jobManagerType></subjob>
<subjob/></job></jrdl>`), ParseOptions{})
		if first := jobs[1].Requirements.LRMS; len(first) != 1 || first[0].Is != "fork" {
			t.Errorf("the first subjob's rules %+v, want fork alone", first)
		}
	})
	t.Run("DDS patterns", func(t *testing.T) {
		r := parse(t, FormatDDS, `<topology name="t">
<declrequirement name="h" type="hostname" value="+.gsi.de"/>
<declrequirement name="w" type="wnname" value="wn.*"/>
<declrequirement name="g" type="gpu" value="2"/>
<declrequirement name="m" type="maxinstances" value="3"/>
<declrequirement name="c" type="custom" value="x"/>
<decltask name="a"><exe>x</exe><requirements><name>h</name><name>w</name><name>g</name><name>m</name><name>c</name></requirements></decltask>
<main name="main"><task>a</task></main></topology>`)
		if len(r.Hosts) != 1 || r.Hosts[0].AnyOf[0] != (events.NamePattern{Pattern: ".+.gsi.de", Syntax: events.SyntaxRegexp}) ||
			r.Hosts[0].From != (events.Origin{Field: "topology/declrequirement[h]", Line: 2, Col: 1}) {
			t.Errorf("hosts %+v", r.Hosts)
		}
		if len(r.Targets) != 1 || r.Targets[0].AnyOf[0].Pattern != "wn.*" {
			t.Errorf("targets %+v", r.Targets)
		}
		if len(r.Attributes) != 1 || r.Attributes[0].Name != "gpus" || *r.Attributes[0].AtLeast != 2 {
			t.Errorf("attributes %+v", r.Attributes)
		}
		// custom is accepted unread, as DDS's scheduler does; maxinstances places.
		if len(r.Unsupported) != 0 {
			t.Errorf("unsupported %+v, want none (custom is not checked)", r.Unsupported)
		}
		if p := r.Placement; p == nil || p.MaxPerHost != 3 || p.Spread != "a" || p.Index != 0 || p.From.Field != "topology/declrequirement[m]" {
			t.Errorf("placement %+v, want at most 3 of task a to a host", p)
		}
	})
}

// TestJRDLContactAndCountPlace: resourceManagerContact and the processor count become
// placement requirements (host_names and processors), each naming its element, and a
// subjob's override its job's. Before, both were recorded and never matched.
func TestJRDLContactAndCountPlace(t *testing.T) {
	jobs, err := Parse("doc", []byte(`<jrdl><job><executable><path><stringElement value="x"/></path></executable>
<resourceManagerContact><string><stringElement value="http://eros01.gridcenter.or.kr:8080"/></string></resourceManagerContact>
<resource><count><integer value="64"/></count></resource>
<subjob><resourceManagerContact><string><stringElement value="hpc-login:22"/></string></resourceManagerContact>
<count><integer value="2"/></count></subjob>
<subjob/></job></jrdl>`), ParseOptions{Format: FormatJRDL})
	if err != nil {
		t.Fatal(err)
	}
	first, second := jobs[len(jobs)-2].Requirements, jobs[len(jobs)-1].Requirements
	if len(first.Hosts) != 1 || first.Hosts[0].AnyOf[0].Pattern != "hpc-login" ||
		first.Hosts[0].From != (events.Origin{Field: "job[0]/subjob[0]/resourceManagerContact", Line: 4, Col: 9}) {
		t.Errorf("first subjob's hosts %+v", first.Hosts)
	}
	if first.Processors != 2 || first.Origin("processors").Field != "job[0]/subjob[0]/count" {
		t.Errorf("first subjob's processors %d from %+v", first.Processors, first.Origin("processors"))
	}
	if len(second.Hosts) != 1 || second.Hosts[0].AnyOf[0].Pattern != "eros01.gridcenter.or.kr" {
		t.Errorf("second subjob's hosts %+v", second.Hosts)
	}
	if second.Processors != 64 || second.Origin("processors") != (events.Origin{Field: "job[0]/resource/count", Line: 3, Col: 11}) {
		t.Errorf("second subjob's processors %d from %+v", second.Processors, second.Origin("processors"))
	}
	_, err = Parse("doc", []byte(`<jrdl><job><executable><path><stringElement value="x"/></path></executable>
<resourceManagerContact><string><stringElement value="http://"/></string></resourceManagerContact></job></jrdl>`), ParseOptions{Format: FormatJRDL})
	if err == nil || !strings.Contains(err.Error(), "resourceManagerContact/string") {
		t.Errorf("a contact with no host: %v", err)
	}
}
