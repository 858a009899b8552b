package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The first schema of the canonical job kept requirements in its languages' terms:
// hosts as globs any of which would do, lrms as one name, fork as a flag, JRDL's
// resource attributes by their JRDL names, DDS's requirements only in the DDS context,
// and v3's fork rule implied by the original format. Jobs recorded then (in the log, in
// state snapshots) are read into today's terms here, when they are decoded, so nothing a
// submitter asked for is lost across the upgrade. This is the only place that still
// knows those names: it reads the old wire, it writes nothing.

// requirementsV1 are the first schema's fields whose names or types changed.
type requirementsV1 struct {
	Hosts     []string          `json:"hosts"`
	LRMS      string            `json:"lrms"`
	Fork      *bool             `json:"fork"`
	Resources map[string]string `json:"resources"`
}

// UnmarshalJSON reads a job of any schema: a first-schema job's requirements are
// upcast to today's (see requirementsV1). A field no schema has is an error, as the
// canonical job is gridwire's own shape (and a decoder's DisallowUnknownFields does not
// reach into an UnmarshalJSON, so the strictness is kept here).
func (j *Job) UnmarshalJSON(b []byte) error {
	type plain Job
	type current Requirements
	var w struct {
		*plain
		Requirements *struct {
			current
			requirementsV1
		} `json:"requirements"`
	}
	w.plain = (*plain)(j)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	if w.Requirements == nil {
		return nil
	}
	j.Requirements = Requirements(w.Requirements.current)
	j.upcastV1(w.Requirements.requirementsV1)
	return nil
}

func (j *Job) upcastV1(v1 requirementsV1) {
	r := &j.Requirements
	if len(v1.Hosts) > 0 {
		n := NameRequirement{From: Origin{Field: "requirements.hostname"}}
		for _, h := range v1.Hosts {
			n.AnyOf = append(n.AnyOf, NamePattern{Pattern: h})
		}
		r.Hosts = append(r.Hosts, n)
	}
	v3 := strings.HasPrefix(j.Original.Format, "v3")
	switch {
	case v1.LRMS != "":
		r.LRMS = append(r.LRMS, LRMSRule{Is: v1.LRMS, From: Origin{Field: "requirements.lrms"}})
	case v1.Fork != nil && !*v1.Fork:
		r.LRMS = append(r.LRMS, LRMSRule{IsNot: LRMSFork, From: Origin{Field: "requirements.fork"}})
	case v1.Fork != nil:
		r.LRMSDefault = LRMSAny
	case v3 && len(r.LRMS) == 0 && r.LRMSDefault == LRMSUnsaid:
		// Today's ingest always says a v3 job's LRMS rule; one that says none is of the
		// first schema, where the rule was implied by the format.
		r.LRMSDefault = LRMSBatch
		r.SetOrigin("lrms_default", Origin{Field: "requirements.fork (not set)"})
	}
	for _, k := range slices.Sorted(maps.Keys(v1.Resources)) {
		upcastResourceV1(r, k, v1.Resources[k])
	}
	if j.DDS != nil && len(j.DDS.Requirements) > 0 && len(r.Hosts)+len(r.Targets)+len(r.Attributes)+len(r.Unsupported) == 0 {
		upcastDDSV1(r, j.DDS.Requirements)
	}
}

// resourceAttributesV1 maps the JRDL resource names the first schema kept onto the
// system info attributes they bound.
var resourceAttributesV1 = map[string]string{
	"minRAMAvailable": "ram_available", "minStorageAvailable": "storage_available", "minFreeCPU": "free_cpu",
	"last1Min": "availability_1min", "last5Min": "availability_5min", "last15Min": "availability_15min",
	"schedulingPlugin": "scheduling_plugin",
}

func upcastResourceV1(r *Requirements, key, val string) {
	from := Origin{Field: "resource/" + key}
	if key == "schedulingType" {
		rule := LRMSRule{Is: LRMSFork, From: from}
		if val != "fork" {
			rule = LRMSRule{IsNot: LRMSFork, From: from}
		}
		r.LRMS = append(r.LRMS, rule)
		return
	}
	name := resourceAttributesV1[key]
	if name == "" {
		name = key
	}
	a := AttributeRequirement{Name: name, Pattern: val, From: from}
	if n, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
		a.AtLeast, a.Pattern = &n, ""
	}
	r.Attributes = append(r.Attributes, a)
}

func upcastDDSV1(r *Requirements, reqs []DDSRequirement) {
	for _, q := range reqs {
		from := Origin{Field: "requirement " + q.Name}
		switch q.Type {
		case "hostname", "wnname":
			v := q.Value
			if strings.HasPrefix(v, "+") {
				v = "." + v
			}
			n := NameRequirement{AnyOf: []NamePattern{{Pattern: v, Syntax: SyntaxRegexp}}, From: from}
			if q.Type == "hostname" {
				r.Hosts = append(r.Hosts, n)
			} else {
				r.Targets = append(r.Targets, n)
			}
		case "gpu":
			n, _ := strconv.ParseFloat(q.Value, 64)
			r.Attributes = append(r.Attributes, AttributeRequirement{Name: "gpus", AtLeast: &n, From: from})
		case "maxinstances":
		default:
			r.Unsupported = append(r.Unsupported, UnsupportedRequirement{
				What: fmt.Sprintf("requirement type %q is not supported here", q.Type), From: from})
		}
	}
}
