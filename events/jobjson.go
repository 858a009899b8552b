package events

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// MarshalJob returns the bytes json.Marshal(j) returns, written field by field without
// reflection. A submitted event's data is a canonical job, and every accepted job is
// encoded once: through encoding/json's reflective encoder that was a third of what
// ingest spends on a small job. The bytes are hashed and signed as they are, so they are
// json.Marshal's to the byte (TestMarshalJobMatchesJSON and FuzzMarshalJob hold the two
// together over every field of every type a Job reaches); a job holding a value that
// json.Marshal refuses (a time outside its range, a bound that is not a number) is handed
// to json.Marshal, which gives its error.
func MarshalJob(j *Job) ([]byte, error) {
	if !encodable(j) {
		return json.Marshal(j)
	}
	buf := jobBuffers.Get().(*[]byte)
	b := appendJob((*buf)[:0], j)
	out := slices.Clone(b) // exactly as long as it is: it is kept until appended
	if cap(b) <= maxPooledJobBuffer {
		*buf = b
		jobBuffers.Put(buf)
	}
	return out, nil
}

// jobBuffers holds the buffers MarshalJob writes in, up to maxPooledJobBuffer long.
var jobBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledJobBuffer = 64 << 10

// marshalPayload is json.Marshal, with a canonical job written by MarshalJob.
func marshalPayload(payload any) ([]byte, error) {
	switch p := payload.(type) {
	case *Job:
		if p != nil {
			return MarshalJob(p)
		}
	case Job:
		return MarshalJob(&p)
	}
	return json.Marshal(payload)
}

// encodable reports whether json.Marshal takes every value of j: its times (years 0 to
// 9999, zone offsets under a day) and its numeric bounds (no NaN or infinity) are the
// only values it can refuse.
func encodable(j *Job) bool {
	for _, t := range []*time.Time{j.StartTime, j.StartBefore} {
		if t != nil {
			if _, err := t.MarshalJSON(); err != nil {
				return false
			}
		}
	}
	for _, a := range j.Requirements.Attributes {
		if a.AtLeast != nil && (math.IsInf(*a.AtLeast, 0) || math.IsNaN(*a.AtLeast)) {
			return false
		}
	}
	return true
}

// appendKey starts a member of the object being written: a comma unless it is the
// first. key ends in its colon, as `"name":`.
func appendKey(b []byte, key string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	return append(b, key...)
}

func appendStr(b []byte, key, s string) []byte {
	return appendJSONString(appendKey(b, key), s)
}

// appendStrOmit, appendIntOmit, appendBoolOmit and appendStringsOmit write a member
// tagged omitempty: nothing for the empty value.
func appendStrOmit(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendStr(b, key, s)
}

func appendInt(b []byte, key string, n int64) []byte {
	return strconv.AppendInt(appendKey(b, key), n, 10)
}

func appendIntOmit(b []byte, key string, n int64) []byte {
	if n == 0 {
		return b
	}
	return appendInt(b, key, n)
}

func appendBoolOmit(b []byte, key string, v bool) []byte {
	if !v {
		return b
	}
	return append(appendKey(b, key), "true"...)
}

func appendStringsOmit(b []byte, key string, list []string) []byte {
	if len(list) == 0 {
		return b
	}
	b = append(appendKey(b, key), '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendList writes a list member of objects, each by one, or nothing when it is empty.
func appendList[T any](b []byte, key string, list []T, one func([]byte, *T) []byte) []byte {
	if len(list) == 0 {
		return b
	}
	b = append(appendKey(b, key), '[')
	for i := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = one(b, &list[i])
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendStringMapOmit writes a map[string]string, keys in order, or nothing when empty.
func appendStringMapOmit(b []byte, key string, m map[string]string) []byte {
	if len(m) == 0 {
		return b
	}
	b = append(appendKey(b, key), '{')
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendJSONString(b, k), ':')
		b = appendJSONString(b, m[k])
	}
	return append(b, '}')
}

// sortedKeys is m's keys in encoding/json's order; one key needs no slice.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendTimeOmit writes a *time.Time as time.Time.MarshalJSON does (encodable has
// checked that it takes it).
func appendTimeOmit(b []byte, key string, t *time.Time) []byte {
	if t == nil {
		return b
	}
	b = append(appendKey(b, key), '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendPeriodOmit writes a *Period as its text (Period.MarshalText), a JSON string.
func appendPeriodOmit(b []byte, key string, p *Period) []byte {
	if p == nil {
		return b
	}
	return appendStr(b, key, p.String())
}

func appendJob(b []byte, j *Job) []byte {
	b = append(b, '{')
	b = appendStr(b, `"id":`, j.ID)
	b = appendStrOmit(b, `"name":`, j.Name)
	b = appendStrOmit(b, `"kind":`, string(j.Kind))
	b = appendStrOmit(b, `"parent":`, j.Parent)
	b = appendStringsOmit(b, `"children":`, j.Children)
	if r := j.ChildRange; r != nil {
		b = append(appendKey(b, `"child_range":`), '{')
		b = appendStr(b, `"first":`, r.First)
		b = appendInt(b, `"count":`, int64(r.Count))
		b = append(b, '}')
	}
	b = appendStrOmit(b, `"submitter":`, j.Submitter)
	b = appendStrOmit(b, `"idempotency_key":`, j.IdempotencyKey)
	b = appendOriginal(append(appendKey(b, `"original":`), '{'), &j.Original)
	b = append(b, '}')

	b = appendStrOmit(b, `"executable":`, j.Executable)
	b = appendStringsOmit(b, `"arguments":`, j.Arguments)
	b = appendList(b, `"environment":`, j.Environment, appendEnvVar)
	b = appendStrOmit(b, `"directory":`, j.Directory)
	b = appendStringsOmit(b, `"library_path":`, j.LibraryPath)

	b = appendStrOmit(b, `"stdin":`, j.Stdin)
	b = appendStringsOmit(b, `"stdout":`, j.Stdout)
	b = appendStringsOmit(b, `"stderr":`, j.Stderr)

	b = appendIntOmit(b, `"count":`, int64(j.Count))
	b = appendBoolOmit(b, `"mpi":`, j.MPI)
	b = appendStrOmit(b, `"job_type":`, string(j.JobType))

	b = appendStrOmit(b, `"default_storage_base":`, j.DefaultStorageBase)
	b = appendIntOmit(b, `"max_transfer_attempts":`, int64(j.MaxTransferAttempts))
	b = appendList(b, `"stage_in":`, j.StageIn, appendFileCopy)
	b = appendList(b, `"stage_out":`, j.StageOut, appendFileCopy)
	b = appendStringsOmit(b, `"cleanup":`, j.Cleanup)

	b = appendTimeOmit(b, `"start_time":`, j.StartTime)
	b = appendTimeOmit(b, `"start_before":`, j.StartBefore)
	b = appendIntOmit(b, `"duration":`, int64(j.Duration))
	b = appendPeriodOmit(b, `"start_within":`, j.StartWithin)
	b = appendPeriodOmit(b, `"walltime":`, j.Walltime)
	b = appendList(b, `"limits":`, j.Limits, appendLimit)

	b = appendIntOmit(b, `"restarts":`, int64(j.Restarts))
	if c := j.Coallocation; c != nil {
		b = append(appendCoallocation(append(appendKey(b, `"coallocation":`), '{'), c), '}')
	}
	b = appendStringsOmit(b, `"substitutions":`, j.Substitutions)

	b = append(appendRequirements(append(appendKey(b, `"requirements":`), '{'), &j.Requirements), '}')
	if a := j.Application; a != nil {
		b = append(appendKey(b, `"application":`), '{')
		b = appendStr(b, `"name":`, a.Name)
		b = appendStrOmit(b, `"version":`, a.Version)
		b = appendStrOmit(b, `"variation":`, a.Variation)
		b = append(b, '}')
	}
	b = appendStringMapOmit(b, `"fields":`, j.Fields)
	if d := j.DDS; d != nil {
		b = append(appendDDS(append(appendKey(b, `"dds":`), '{'), d), '}')
	}
	b = appendStringMapOmit(b, `"extra":`, j.Extra)
	return append(b, '}')
}

func appendOriginal(b []byte, o *Original) []byte {
	b = appendStrOmit(b, `"format":`, o.Format)
	b = appendStrOmit(b, `"content_type":`, o.ContentType)
	b = appendStrOmit(b, `"file":`, o.File)
	b = appendStrOmit(b, `"sha256":`, o.SHA256)
	if len(o.Bytes) > 0 {
		b = append(appendKey(b, `"bytes":`), '"')
		b = base64.StdEncoding.AppendEncode(b, o.Bytes)
		b = append(b, '"')
	}
	b = appendIntOmit(b, `"index":`, int64(o.Index))
	return appendStrOmit(b, `"path":`, o.Path)
}

func appendEnvVar(b []byte, e *EnvVar) []byte {
	b = appendStr(b, `"name":`, e.Name)
	return appendStr(b, `"value":`, e.Value)
}

func appendLimit(b []byte, l *Limit) []byte {
	b = appendStr(b, `"resource":`, string(l.Resource))
	return appendInt(b, `"value":`, l.Value)
}

func appendFileCopy(b []byte, c *FileCopy) []byte {
	b = appendStr(b, `"from":`, c.From)
	b = appendStr(b, `"to":`, c.To)
	b = appendBoolOmit(b, `"directory":`, c.Directory)
	b = appendIntOmit(b, `"attempts":`, int64(c.Attempts))
	return appendStrOmit(b, `"when":`, c.When)
}

func appendCoallocation(b []byte, c *Coallocation) []byte {
	b = appendInt(b, `"group":`, int64(c.Group))
	b = appendInt(b, `"size":`, int64(c.Size))
	b = appendStrOmit(b, `"contact":`, c.Contact)
	b = appendStrOmit(b, `"job_manager":`, c.JobManager)
	b = appendIntOmit(b, `"total_count":`, int64(c.TotalCount))
	return appendStrOmit(b, `"on_sibling_end":`, c.OnSiblingEnd)
}

func appendRequirements(b []byte, r *Requirements) []byte {
	b = appendList(b, `"host_names":`, r.Hosts, appendNameRequirement)
	b = appendList(b, `"target_names":`, r.Targets, appendNameRequirement)
	b = appendList(b, `"lrms_rules":`, r.LRMS, appendLRMSRule)
	b = appendStrOmit(b, `"lrms_default":`, string(r.LRMSDefault))
	b = appendStrOmit(b, `"queue":`, r.Queue)

	b = appendStrOmit(b, `"os_name":`, r.OSName)
	b = appendStrOmit(b, `"os_release":`, r.OSRelease)
	b = appendStrOmit(b, `"os_version":`, r.OSVersion)
	b = appendStrOmit(b, `"platform":`, r.Platform)
	b = appendStrOmit(b, `"cpu_instruction_set":`, r.CPUInstructionSet)

	b = appendIntOmit(b, `"smp_size":`, r.SMPSize)
	b = appendIntOmit(b, `"processors":`, r.Processors)
	b = appendIntOmit(b, `"ram_size":`, r.RAMSize)
	b = appendIntOmit(b, `"virtual_size":`, r.VirtualSize)
	b = appendIntOmit(b, `"cpu_hz":`, r.CPUHz)

	b = appendList(b, `"software":`, r.Software, appendSoftware)
	b = appendList(b, `"attributes":`, r.Attributes, appendAttribute)
	if p := r.Placement; p != nil {
		b = append(appendKey(b, `"placement":`), '{')
		b = appendStrOmit(b, `"together":`, p.Together)
		b = appendStrOmit(b, `"spread":`, p.Spread)
		b = appendInt(b, `"index":`, int64(p.Index))
		b = appendIntOmit(b, `"max_per_host":`, int64(p.MaxPerHost))
		b = append(appendFrom(b, p.From), '}')
	}
	b = appendList(b, `"unsupported":`, r.Unsupported, appendUnsupported)
	if len(r.Origins) > 0 {
		b = append(appendKey(b, `"origins":`), '{')
		for i, k := range sortedKeys(r.Origins) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendJSONString(b, k), ':', '{')
			b = append(appendOrigin(b, r.Origins[k]), '}')
		}
		b = append(b, '}')
	}
	return b
}

func appendNameRequirement(b []byte, n *NameRequirement) []byte {
	if n.AnyOf == nil { // not omitempty: a nil list is null
		b = append(appendKey(b, `"any_of":`), "null"...)
	} else {
		b = append(appendKey(b, `"any_of":`), '[')
		for i := range n.AnyOf {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendStr(append(b, '{'), `"pattern":`, n.AnyOf[i].Pattern)
			b = append(appendStrOmit(b, `"syntax":`, string(n.AnyOf[i].Syntax)), '}')
		}
		b = append(b, ']')
	}
	return appendFrom(b, n.From)
}

func appendLRMSRule(b []byte, l *LRMSRule) []byte {
	b = appendStrOmit(b, `"is":`, l.Is)
	b = appendStrOmit(b, `"is_not":`, l.IsNot)
	return appendFrom(b, l.From)
}

func appendSoftware(b []byte, s *SoftwareConstraint) []byte {
	b = appendStr(b, `"name":`, s.Name)
	b = appendStrOmit(b, `"op":`, s.Op)
	b = appendStrOmit(b, `"version":`, s.Version)
	return appendFrom(b, s.From)
}

func appendAttribute(b []byte, a *AttributeRequirement) []byte {
	b = appendStr(b, `"name":`, a.Name)
	if a.AtLeast != nil {
		b = appendFloat(appendKey(b, `"at_least":`), *a.AtLeast)
	}
	b = appendStrOmit(b, `"pattern":`, a.Pattern)
	return appendFrom(b, a.From)
}

func appendUnsupported(b []byte, u *UnsupportedRequirement) []byte {
	b = appendStr(b, `"what":`, u.What)
	return appendFrom(b, u.From)
}

// appendFrom writes an Origin member tagged omitzero: nothing for the zero Origin.
func appendFrom(b []byte, o Origin) []byte {
	if o == (Origin{}) {
		return b
	}
	b = append(appendKey(b, `"from":`), '{')
	return append(appendOrigin(b, o), '}')
}

func appendOrigin(b []byte, o Origin) []byte {
	b = appendStr(b, `"field":`, o.Field)
	b = appendIntOmit(b, `"line":`, int64(o.Line))
	return appendIntOmit(b, `"col":`, int64(o.Col))
}

// appendFloat writes a finite float64 as encoding/json does (ES6 number formatting).
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func appendDDS(b []byte, d *DDSContext) []byte {
	b = appendStrOmit(b, `"topology":`, d.Topology)
	b = appendStrOmit(b, `"task_path":`, d.TaskPath)
	b = appendStrOmit(b, `"task_id":`, d.TaskID)
	b = appendInt(b, `"task_index":`, int64(d.TaskIndex))
	b = appendInt(b, `"collection_index":`, int64(d.CollectionIndex))
	b = appendStrOmit(b, `"task_name":`, d.TaskName)
	b = appendStrOmit(b, `"group_name":`, d.GroupName)
	b = appendStrOmit(b, `"collection_name":`, d.CollectionName)
	b = appendStrOmit(b, `"collection_path":`, d.CollectionPath)
	b = appendStrOmit(b, `"exe":`, d.Exe)
	b = appendBoolOmit(b, `"exe_reachable":`, d.ExeReachable)
	b = appendStrOmit(b, `"env_script":`, d.EnvScript)
	b = appendBoolOmit(b, `"env_reachable":`, d.EnvReachable)
	b = appendList(b, `"properties":`, d.Properties, appendDDSProperty)
	b = appendList(b, `"requirements":`, d.Requirements, appendDDSRequirement)
	b = appendList(b, `"triggers":`, d.Triggers, appendDDSTrigger)
	b = appendList(b, `"assets":`, d.Assets, appendDDSAsset)
	return appendStringMapOmit(b, `"vars":`, d.Vars)
}

func appendDDSProperty(b []byte, p *DDSProperty) []byte {
	b = appendStr(b, `"name":`, p.Name)
	b = appendStrOmit(b, `"access":`, p.Access)
	return appendStrOmit(b, `"scope":`, p.Scope)
}

func appendDDSRequirement(b []byte, r *DDSRequirement) []byte {
	b = appendStrOmit(b, `"name":`, r.Name)
	b = appendStr(b, `"type":`, r.Type)
	return appendStr(b, `"value":`, r.Value)
}

func appendDDSTrigger(b []byte, t *DDSTrigger) []byte {
	b = appendStrOmit(b, `"name":`, t.Name)
	b = appendStr(b, `"condition":`, t.Condition)
	b = appendStr(b, `"action":`, t.Action)
	return appendStrOmit(b, `"arg":`, t.Arg)
}

func appendDDSAsset(b []byte, a *DDSAsset) []byte {
	b = appendStr(b, `"name":`, a.Name)
	b = appendStr(b, `"type":`, a.Type)
	b = appendStr(b, `"visibility":`, a.Visibility)
	return appendStr(b, `"value":`, a.Value)
}

// jsonSafe marks the bytes encoding/json writes as they are in a string, with HTML
// escaping on: printable ASCII but for quote, backslash, <, > and &, and DEL.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString appends s as encoding/json writes a string (HTML escaping on, as
// json.Marshal has it): quote, backslash and control characters escaped (\b, \f, \n, \r,
// \t by name, the rest as \u00XX), <, > and & as \u003c, \u003e and \u0026, each byte of
// invalid UTF-8 as \ufffd, and U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if jsonSafe[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
