package events

import (
	"encoding/json"
	"reflect"
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

// TestRequirementsUpcastFirstSchema: a job recorded before requirements were canonical
// still decodes, with its hosts, lrms and fork in today's terms.
func TestRequirementsUpcastFirstSchema(t *testing.T) {
	var r Requirements
	err := json.Unmarshal([]byte(`{"hosts":["a","b*"],"fork":false,"queue":"q","ram_size":64,"resources":{"minFreeCPU":"4"}}`), &r)
	if err != nil {
		t.Fatal(err)
	}
	want := Requirements{
		Hosts: []NameRequirement{{AnyOf: []NamePattern{{Pattern: "a"}, {Pattern: "b*"}}, From: Origin{Field: "hostname"}}},
		LRMS:  []LRMSRule{{IsNot: LRMSFork, From: Origin{Field: "fork"}}}, Queue: "q", RAMSize: 64,
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
	r = Requirements{}
	if err := json.Unmarshal([]byte(`{"lrms":"PBS","fork":false}`), &r); err != nil || len(r.LRMS) != 1 || r.LRMS[0].Is != "PBS" {
		t.Errorf("a named lrms decides alone: %+v %v", r.LRMS, err)
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
