package events

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestRequirementsRoundTrip(t *testing.T) {
	two := 2.0
	r := Requirements{
		Hosts:       []NameRequirement{{AnyOf: []NamePattern{{Pattern: "n*"}, {Pattern: "x.+", Syntax: SyntaxRegexp}}, From: Origin{Field: "hostname", Line: 3, Col: 4}}},
		LRMS:        []LRMSRule{{IsNot: LRMSFork}},
		LRMSDefault: LRMSBatch, Queue: "q", RAMSize: 512, Processors: 8,
		Attributes:  []AttributeRequirement{{Name: "gpus", AtLeast: &two}},
		Unsupported: []UnsupportedRequirement{{What: "w"}},
		Origins:     map[string]Origin{"queue": {Field: "requirements.queue", Line: 9}},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got Requirements
	if err := json.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip: %+v %v\n%s", got, err, b)
	}
}

// TestJobUpcastsFirstSchemaRequirements: a job recorded before requirements were
// canonical decodes with what it asked for in today's terms.
func TestJobUpcastsFirstSchemaRequirements(t *testing.T) {
	decode := func(t *testing.T, doc string) Requirements {
		t.Helper()
		var j Job
		if err := json.Unmarshal([]byte(doc), &j); err != nil {
			t.Fatal(err)
		}
		return j.Requirements
	}
	from := func(f string) Origin { return Origin{Field: f} }
	five, four := 5.0, 4.0
	for _, c := range []struct {
		name, doc string
		want      Requirements
	}{
		{"v3 hosts and fork: false", `{"original":{"format":"v3-json"},"requirements":{"hosts":["a","b*"],"fork":false,"queue":"q","ram_size":64}}`,
			Requirements{Hosts: []NameRequirement{{AnyOf: []NamePattern{{Pattern: "a"}, {Pattern: "b*"}}, From: from("requirements.hostname")}},
				LRMS: []LRMSRule{{IsNot: LRMSFork, From: from("requirements.fork")}}, Queue: "q", RAMSize: 64}},
		{"v3 lrms decides alone", `{"original":{"format":"v3-yaml"},"requirements":{"lrms":"PBS","fork":false}}`,
			Requirements{LRMS: []LRMSRule{{Is: "PBS", From: from("requirements.lrms")}}}},
		{"v3 fork: true", `{"original":{"format":"v3-json"},"requirements":{"fork":true}}`, Requirements{LRMSDefault: LRMSAny}},
		{"v3 fork rule implied", `{"original":{"format":"v3-json"},"requirements":{}}`,
			Requirements{LRMSDefault: LRMSBatch, Origins: map[string]Origin{"lrms_default": from("requirements.fork (not set)")}}},
		{"JRDL resources", `{"original":{"format":"jrdl"},"requirements":{"lrms":"pbs","resources":{"minFreeCPU":"5","schedulingType":"scheduler","schedulingPlugin":"Def*"}}}`,
			Requirements{LRMS: []LRMSRule{{Is: "pbs", From: from("requirements.lrms")}, {IsNot: LRMSFork, From: from("resource/schedulingType")}},
				Attributes: []AttributeRequirement{{Name: "free_cpu", AtLeast: &five, From: from("resource/minFreeCPU")},
					{Name: "scheduling_plugin", Pattern: "Def*", From: from("resource/schedulingPlugin")}}}},
		{"DDS requirements", `{"original":{"path":"main/a_0"},"requirements":{},"dds":{"task_index":0,"collection_index":-1,"requirements":[
			{"name":"h","type":"hostname","value":"+.gsi.de"},{"name":"g","type":"gpu","value":"4"},{"name":"m","type":"maxinstances","value":"2"},{"name":"c","type":"custom","value":"x"}]}}`,
			Requirements{Hosts: []NameRequirement{{AnyOf: []NamePattern{{Pattern: ".+.gsi.de", Syntax: SyntaxRegexp}}, From: from("requirement h")}},
				Attributes:  []AttributeRequirement{{Name: "gpus", AtLeast: &four, From: from("requirement g")}},
				Unsupported: []UnsupportedRequirement{{What: `requirement type "custom" is not supported here`, From: from("requirement c")}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := decode(t, c.doc); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestJobOfTodayIsNotUpcast: a job in today's terms decodes as it was written, however
// its language is named.
func TestJobOfTodayIsNotUpcast(t *testing.T) {
	for _, j := range []Job{
		{Original: Original{Format: "v3-json"}, Requirements: Requirements{LRMSDefault: LRMSAny}},
		{Original: Original{Format: "v3-json"}, Requirements: Requirements{LRMS: []LRMSRule{{IsNot: LRMSFork}}}},
		{Original: Original{Format: "jrdl"}},
		{DDS: &DDSContext{Requirements: []DDSRequirement{{Type: "maxinstances", Value: "2"}}}},
	} {
		b, _ := json.Marshal(j)
		var got Job
		if err := json.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got, j) {
			t.Errorf("%s: got %+v (%v)", b, got.Requirements, err)
		}
	}
}

func TestOriginLabel(t *testing.T) {
	for _, c := range []struct {
		o    Origin
		want string
	}{
		{Origin{}, "queue"}, {Origin{Field: "requirements.queue"}, "requirements.queue"},
		{Origin{Field: "job[0]/resource/minFreeCPU", Line: 12, Col: 3}, "job[0]/resource/minFreeCPU (line 12)"},
	} {
		if got := c.o.Label("queue"); got != c.want {
			t.Errorf("%+v: %q, want %q", c.o, got, c.want)
		}
	}
}

// TestJobRefusesUnknownFields: the canonical job is gridwire's own shape; a field no
// schema has is refused wherever a job is decoded, strict decoder or not.
func TestJobRefusesUnknownFields(t *testing.T) {
	for _, doc := range []string{`{"id":"x","colour":"blue"}`, `{"requirements":{"hostz":["a"]}}`, `{"requirements":{"attributes":[{"name":"gpus","at_most":1}]}}`} {
		var j Job
		if err := json.Unmarshal([]byte(doc), &j); err == nil {
			t.Errorf("%s: decoded", doc)
		}
		dec := json.NewDecoder(strings.NewReader(doc))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&j); err == nil {
			t.Errorf("%s: decoded by a strict decoder", doc)
		}
	}
}

// BenchmarkJobDecode decodes a submitted v3 job with requirements through Job's own
// decoding (upcast check and strictness) beside the yardstick of a plain struct decode of
// the same bytes, which is what decoding a Job was before.
func BenchmarkJobDecode(b *testing.B) {
	one := 1.0
	job := Job{ID: NewID(), Executable: "/bin/cat", Arguments: []string{"in.txt"}, Original: Original{Format: "v3-json", Bytes: make([]byte, 400)},
		StageIn: []FileCopy{{From: "https://example.org/in.txt", To: "in.txt"}},
		Requirements: Requirements{LRMS: []LRMSRule{{Is: "PBS", From: Origin{Field: "requirements.lrms", Line: 3, Col: 4}}},
			Queue: "short", RAMSize: 2048, Software: []SoftwareConstraint{{Name: "gcc", Op: ">=", Version: "9"}},
			Attributes: []AttributeRequirement{{Name: "gpus", AtLeast: &one}},
			Origins:    map[string]Origin{"queue": {Field: "requirements.queue", Line: 4, Col: 5}}}}
	data, err := json.Marshal(job)
	if err != nil {
		b.Fatal(err)
	}
	type plain Job
	b.Run("Job", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var j Job
			if err := json.Unmarshal(data, &j); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain-struct-yardstick", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var j plain
			if err := json.Unmarshal(data, &j); err != nil {
				b.Fatal(err)
			}
		}
	})
}
