package events

import (
	"fmt"
	"strings"
)

// Requirements constrain where a job may run, in the gateway's own terms. Every
// description language maps its vocabulary onto these fields when ingest reads it
// (resource names, units, the language's LRMS default), so matching a job against
// targets needs no knowledge of any language: a target may run a job when it meets
// every requirement here. The zero value means anywhere.
//
// Units are fixed: memory in megabytes, clock rates in hertz, counts in processors.
// Every requirement records where it came from (From on list items, Origins for the
// single-valued fields), so a refusal names the submitter's own field and line.
type Requirements struct {
	// Hosts: for each entry, one of its patterns must name a host of the target.
	Hosts []NameRequirement `json:"host_names,omitempty"`
	// Targets: for each entry, one of its patterns must name the target itself (the
	// cluster's name in the config).
	Targets []NameRequirement `json:"target_names,omitempty"`
	// LRMS: every rule must hold of the target's batch system.
	LRMS []LRMSRule `json:"lrms_rules,omitempty"`
	// LRMSDefault is the job's rule for an LRMS it did not name.
	LRMSDefault LRMSDefault `json:"lrms_default,omitempty"`
	// Queue must be one of the target's queues; "" takes the target's first.
	Queue string `json:"queue,omitempty"`

	// Patterns with * and ?, matched ignoring case against the target's system info.
	OSName            string `json:"os_name,omitempty"`
	OSRelease         string `json:"os_release,omitempty"`
	OSVersion         string `json:"os_version,omitempty"`
	Platform          string `json:"platform,omitempty"`
	CPUInstructionSet string `json:"cpu_instruction_set,omitempty"`

	// Lower bounds on the target's system info.
	SMPSize     int64 `json:"smp_size,omitempty"`     // processors on one host
	Processors  int64 `json:"processors,omitempty"`   // processors in all (hosts × SMP size, or the target's cpus)
	RAMSize     int64 `json:"ram_size,omitempty"`     // megabytes
	VirtualSize int64 `json:"virtual_size,omitempty"` // megabytes
	CPUHz       int64 `json:"cpu_hz,omitempty"`       // hertz

	// Software lists packages the target must have installed, every one.
	Software []SoftwareConstraint `json:"software,omitempty"`
	// Attributes bound further attributes of the target's system info, by the names the
	// gateway's config gives them (ram_available, storage_available, free_cpu, gpus, ...).
	Attributes []AttributeRequirement `json:"attributes,omitempty"`
	// Placement chooses the host within a cluster of several hosts for jobs that must
	// share one or spread over them (DDS collections and maxinstances).
	Placement *HostPlacement `json:"placement,omitempty"`
	// Unsupported holds requirements the description states but the gateway has no way
	// to check. No target meets them, so a job never runs where one would be ignored.
	Unsupported []UnsupportedRequirement `json:"unsupported,omitempty"`

	// Origins says where each single-valued requirement above came from, keyed by its
	// JSON name ("queue", "os_name", "ram_size", "lrms_default", ...).
	Origins map[string]Origin `json:"origins,omitempty"`
}

// Origin is where a requirement came from in the submitted description.
type Origin struct {
	// Field is the description's own name for it: "requirements.hostname",
	// "job[0]/resource/minFreeCPU", "topology/declrequirement[gpus]".
	Field string `json:"field"`
	Line  int    `json:"line,omitempty"` // 0 when the language implies it (a default)
	Col   int    `json:"col,omitempty"`
}

// Label names the requirement for a message: its origin, with the line when known, or
// fallback (the canonical name) when the origin is not recorded.
func (o Origin) Label(fallback string) string {
	switch {
	case o.Field == "":
		return fallback
	case o.Line > 0:
		return fmt.Sprintf("%s (line %d)", o.Field, o.Line)
	}
	return o.Field
}

// Origin returns where the single-valued requirement with this JSON name came from.
func (r *Requirements) Origin(name string) Origin { return r.Origins[name] }

// SetOrigin records where the single-valued requirement with this JSON name came from.
func (r *Requirements) SetOrigin(name string, o Origin) {
	if r.Origins == nil {
		r.Origins = map[string]Origin{}
	}
	r.Origins[name] = o
}

// Syntax says how a NamePattern reads.
type Syntax string

// Pattern syntaxes. A glob is the default.
const (
	// SyntaxGlob: * is any run, ? one character, everything else literal; case is ignored.
	SyntaxGlob Syntax = "glob"
	// SyntaxRegexp: an RE2 expression the whole name must match; a name equal to the
	// pattern itself (ignoring case) also matches.
	SyntaxRegexp Syntax = "regexp"
)

// NamePattern is one name a target may have.
type NamePattern struct {
	Pattern string `json:"pattern"`
	Syntax  Syntax `json:"syntax,omitempty"` // "" is SyntaxGlob
}

// NameRequirement is met when any of its patterns names the thing asked about.
type NameRequirement struct {
	AnyOf []NamePattern `json:"any_of"`
	From  Origin        `json:"from,omitzero"`
}

// LRMSRule is one rule on the target's batch system, by its name in the config
// (Fork, Slurm, PBS, ...), compared ignoring case. Exactly one of Is and IsNot is set.
type LRMSRule struct {
	Is    string `json:"is,omitempty"`
	IsNot string `json:"is_not,omitempty"`
	From  Origin `json:"from,omitzero"`
}

// LRMSFork is the name of the LRMS that runs jobs as plain processes.
const LRMSFork = "Fork"

// LRMSDefault is what a job takes when no rule of its names an LRMS it must run under.
type LRMSDefault string

// LRMS defaults.
const (
	// LRMSUnsaid: the description says nothing; any LRMS, Fork included.
	LRMSUnsaid LRMSDefault = ""
	// LRMSAny: every LRMS, Fork included, as the description says.
	LRMSAny LRMSDefault = "any"
	// LRMSBatch: a batch system; a Fork target only when the gateway has nothing else
	// (when every target is Fork there is nothing to choose between).
	LRMSBatch LRMSDefault = "batch"
)

// SoftwareConstraint is "name" or "name OP version".
type SoftwareConstraint struct {
	Name    string `json:"name"`
	Op      string `json:"op,omitempty"` // <, <=, ==, >, >=
	Version string `json:"version,omitempty"`
	From    Origin `json:"from,omitzero"`
}

// String is the constraint as written: "abinit > 6".
func (s SoftwareConstraint) String() string {
	if s.Op == "" {
		return s.Name
	}
	return s.Name + " " + s.Op + " " + s.Version
}

// AttributeRequirement bounds one attribute of the target's system info: a numeric
// lower bound (AtLeast) or a pattern with * and ? (Pattern), exactly one of them.
type AttributeRequirement struct {
	Name    string   `json:"name"`
	AtLeast *float64 `json:"at_least,omitempty"`
	Pattern string   `json:"pattern,omitempty"`
	From    Origin   `json:"from,omitzero"`
}

// UnsupportedRequirement is a requirement no target can be checked against.
type UnsupportedRequirement struct {
	What string `json:"what"` // why it cannot be checked
	From Origin `json:"from,omitzero"`
}

// Names reports whether some rule says the LRMS must be name.
func (r *Requirements) Names(lrms string) bool {
	for _, l := range r.LRMS {
		if strings.EqualFold(l.Is, lrms) {
			return true
		}
	}
	return false
}

// HostPlacement places a job on one host of its cluster, among the hosts its Hosts
// requirements name. Jobs are counted in units: a unit is a job alone, or every job of
// one parent with the same Together key (a DDS collection instance), which run on one
// host. Units of one parent with the same Spread name are dealt to hosts in order,
// at most MaxPerHost to a host when it is set (DDS's maxinstances); a unit with no
// limit goes to the host its key hashes to.
type HostPlacement struct {
	Together   string `json:"together,omitempty"`     // the unit's key among its parent's children
	Spread     string `json:"spread,omitempty"`       // the name units are counted under
	Index      int    `json:"index"`                  // the unit's place among those with its Spread name, from 0
	MaxPerHost int    `json:"max_per_host,omitempty"` // 0: no limit
	From       Origin `json:"from,omitzero"`          // where MaxPerHost was written
}
