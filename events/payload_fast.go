package events

import (
	"bytes"
	"encoding/base64"
	"reflect"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// A fold decodes a payload for almost every event (Payload), and encoding/json's
// reflection was the largest part of folding one: a replay folds every event of the log.
// fastPayload reads the payloads of the events a job's life is made of when they are
// written plainly: an object whose keys are field names spelt exactly, whose values are
// strings without escapes, integers without fraction or exponent, and booleans. The two
// large payloads, a job and its incarnation, are read further: their strings with
// escapes (readText), their lists, maps and nested objects, a job's original bytes in
// base64. It writes the fields it reads into v, as json.Unmarshal does; anything else it
// gives up on (a key with an escape or in another case, a null where a value is read, a
// value of another type, a nested value it does not read), and Payload decodes the
// payload with encoding/json, which then writes every field the payload has over what
// fastPayload wrote. FuzzFastPayload holds the two to the same result and the same
// refusals.

// fastPayload decodes data into v when v is a payload it knows and data is plain; false
// otherwise (v may then hold some of data's fields).
func fastPayload(data []byte, v any) bool {
	switch p := v.(type) {
	case *TransferData:
		return readObject(data, transferFields, false, func(k, b []byte, i int) (int, bool) {
			switch string(k) {
			case "direction":
				return readString(b, i, &p.Direction)
			case "from":
				return readString(b, i, &p.From)
			case "to":
				return readString(b, i, &p.To)
			case "attempt":
				return readInt(b, i, &p.Attempt)
			case "of":
				return readInt(b, i, &p.Of)
			case "bytes":
				return readInt(b, i, &p.Bytes)
			case "duration":
				return readInt(b, i, &p.Duration)
			case "sha256":
				return readString(b, i, &p.SHA256)
			case "error":
				return readString(b, i, &p.Error)
			case "directory":
				return readBool(b, i, &p.Directory)
			case "files":
				return readInt(b, i, &p.Files)
			case "permanent":
				return readBool(b, i, &p.Permanent)
			case "backoff":
				return readInt(b, i, &p.Backoff)
			}
			return i, false
		})
	case *StartedData:
		return readObject(data, startedFields, false, func(k, b []byte, i int) (int, bool) {
			switch string(k) {
			case "cluster":
				return readString(b, i, &p.Cluster)
			case "host":
				return readString(b, i, &p.Host)
			case "host_key":
				return readString(b, i, &p.HostKey)
			case "native_id":
				return readString(b, i, &p.NativeID)
			case "native_state":
				return readString(b, i, &p.NativeState)
			case "running":
				return readBool(b, i, &p.Running)
			case "adopted":
				return readBool(b, i, &p.Adopted)
			case "executor":
				return readString(b, i, &p.Executor)
			}
			return i, false
		})
	case *StatusData:
		return readObject(data, statusFields, false, func(k, b []byte, i int) (int, bool) {
			switch string(k) {
			case "state":
				return readString(b, i, (*string)(&p.State))
			case "native_state":
				return readString(b, i, &p.NativeState)
			}
			return i, false // the group's counts
		})
	case *ExitedData:
		return readObject(data, exitedFields, false, func(k, b []byte, i int) (int, bool) {
			switch string(k) {
			case "exit_code":
				return readInt(b, i, &p.ExitCode)
			case "native_state":
				return readString(b, i, &p.NativeState)
			case "reason":
				return readString(b, i, &p.Reason)
			}
			return i, false
		})
	case *StagedOutData:
		return readObject(data, stagedOutFields, false, func(k, b []byte, i int) (int, bool) {
			switch string(k) {
			case "ok":
				return readBool(b, i, &p.OK)
			case "reason":
				return readString(b, i, &p.Reason)
			case "files":
				return readInt(b, i, &p.Files)
			}
			return i, false // the lists
		})
	case *EndData:
		return readObject(data, endFields, false, func(k, b []byte, i int) (int, bool) {
			switch string(k) {
			case "exit_code":
				if p.ExitCode == nil {
					p.ExitCode = new(int)
				}
				return readInt(b, i, p.ExitCode)
			case "reason":
				return readString(b, i, &p.Reason)
			}
			return i, false // the group's summary
		})
	case *Note:
		return readObject(data, noteFields, false, func(k, b []byte, i int) (int, bool) {
			switch string(k) {
			case "reason":
				return readString(b, i, &p.Reason)
			case "action":
				return readString(b, i, &p.Action)
			case "output":
				return readString(b, i, &p.Output)
			}
			return i, false
		})
	case *RestartedData:
		return readObject(data, restartedFields, false, func(k, b []byte, i int) (int, bool) {
			switch string(k) {
			case "attempt":
				return readInt(b, i, &p.Attempt)
			case "of":
				return readInt(b, i, &p.Of)
			case "reason":
				return readString(b, i, &p.Reason)
			}
			return i, false
		})
	case *IncarnatedData:
		return fastIncarnated(data, p)
	case *Job:
		return fastJob(data, p)
	}
	return false
}

// fastJob reads a job as Job.UnmarshalJSON reads it (strictly: a key it does not know
// gives up): every field but a requirement's attributes (floats) and the first schema's
// requirements, which are left to encoding/json. A job with requirements is then upcast
// from the first schema, as UnmarshalJSON does.
func fastJob(data []byte, j *Job) bool {
	sawRequirements := false
	ok := readObject(data, jobFields, true, func(k, b []byte, i int) (int, bool) {
		switch string(k) {
		case "id":
			return readText(b, i, &j.ID)
		case "name":
			return readText(b, i, &j.Name)
		case "kind":
			return readText(b, i, (*string)(&j.Kind))
		case "parent":
			return readText(b, i, &j.Parent)
		case "children":
			return readTexts(b, i, &j.Children)
		case "submitter":
			return readText(b, i, &j.Submitter)
		case "idempotency_key":
			return readText(b, i, &j.IdempotencyKey)
		case "restarts":
			return readInt(b, i, &j.Restarts)
		case "original":
			return readNested(b, i, originalFields, func(k, b []byte, i int) (int, bool) {
				o := &j.Original
				switch string(k) {
				case "format":
					return readText(b, i, &o.Format)
				case "content_type":
					return readText(b, i, &o.ContentType)
				case "file":
					return readText(b, i, &o.File)
				case "sha256":
					return readText(b, i, &o.SHA256)
				case "bytes":
					return readBase64(b, i, &o.Bytes)
				case "index":
					return readInt(b, i, &o.Index)
				case "path":
					return readText(b, i, &o.Path)
				}
				return i, false
			})
		case "executable":
			return readText(b, i, &j.Executable)
		case "arguments":
			return readTexts(b, i, &j.Arguments)
		case "environment":
			return readList(b, i, &j.Environment, objectOf(envFields, func(k, b []byte, i int, v *EnvVar) (int, bool) {
				switch string(k) {
				case "name":
					return readText(b, i, &v.Name)
				case "value":
					return readText(b, i, &v.Value)
				}
				return i, false
			}))
		case "directory":
			return readText(b, i, &j.Directory)
		case "library_path":
			return readTexts(b, i, &j.LibraryPath)
		case "stdin":
			return readText(b, i, &j.Stdin)
		case "stdout":
			return readTexts(b, i, &j.Stdout)
		case "stderr":
			return readTexts(b, i, &j.Stderr)
		case "count":
			return readInt(b, i, &j.Count)
		case "mpi":
			return readBool(b, i, &j.MPI)
		case "job_type":
			return readText(b, i, (*string)(&j.JobType))
		case "default_storage_base":
			return readText(b, i, &j.DefaultStorageBase)
		case "max_transfer_attempts":
			return readInt(b, i, &j.MaxTransferAttempts)
		case "stage_in":
			return readFileCopies(b, i, &j.StageIn)
		case "stage_out":
			return readFileCopies(b, i, &j.StageOut)
		case "cleanup":
			return readTexts(b, i, &j.Cleanup)
		case "substitutions":
			return readTexts(b, i, &j.Substitutions)
		case "requirements":
			// UnmarshalJSON decodes requirements afresh, whatever the job held, and a
			// repeated key into what the first one read.
			var r Requirements
			if sawRequirements {
				r = j.Requirements
			}
			end, ok := readRequirements(b, i, &r)
			j.Requirements, sawRequirements = r, true
			return end, ok
		case "dds":
			if i >= len(b) || b[i] != '{' {
				return i, false
			}
			if j.DDS == nil {
				j.DDS = new(DDSContext)
			}
			return readDDS(b, i, j.DDS)
		case "child_range":
			return readPointer(b, i, &j.ChildRange, objectOf(idRangeFields, func(k, b []byte, i int, r *IDRange) (int, bool) {
				switch string(k) {
				case "first":
					return readText(b, i, &r.First)
				case "count":
					return readInt(b, i, &r.Count)
				}
				return i, false
			}))
		case "start_time":
			return readPointer(b, i, &j.StartTime, readTime)
		case "start_before":
			return readPointer(b, i, &j.StartBefore, readTime)
		case "duration":
			return readInt(b, i, &j.Duration)
		case "start_within":
			return readPointer(b, i, &j.StartWithin, readPeriod)
		case "walltime":
			return readPointer(b, i, &j.Walltime, readPeriod)
		case "limits":
			return readList(b, i, &j.Limits, objectOf(limitFields, func(k, b []byte, i int, l *Limit) (int, bool) {
				switch string(k) {
				case "resource":
					return readText(b, i, (*string)(&l.Resource))
				case "value":
					return readInt(b, i, &l.Value)
				}
				return i, false
			}))
		case "coallocation":
			return readPointer(b, i, &j.Coallocation, objectOf(coallocationFields, func(k, b []byte, i int, c *Coallocation) (int, bool) {
				switch string(k) {
				case "group":
					return readInt(b, i, &c.Group)
				case "size":
					return readInt(b, i, &c.Size)
				case "contact":
					return readText(b, i, &c.Contact)
				case "job_manager":
					return readText(b, i, &c.JobManager)
				case "total_count":
					return readInt(b, i, &c.TotalCount)
				case "on_sibling_end":
					return readText(b, i, &c.OnSiblingEnd)
				}
				return i, false
			}))
		case "application":
			return readPointer(b, i, &j.Application, objectOf(applicationFields, func(k, b []byte, i int, a *Application) (int, bool) {
				switch string(k) {
				case "name":
					return readText(b, i, &a.Name)
				case "version":
					return readText(b, i, &a.Version)
				case "variation":
					return readText(b, i, &a.Variation)
				}
				return i, false
			}))
		case "fields":
			return readTextMap(b, i, &j.Fields)
		case "extra":
			return readTextMap(b, i, &j.Extra)
		}
		return i, false
	})
	if ok && sawRequirements {
		j.upcastV1(requirementsV1{})
	}
	return ok
}

// readDDS reads a task's DDS context: its place in its topology, its properties, assets,
// variables, requirements and triggers.
func readDDS(b []byte, i int, d *DDSContext) (int, bool) {
	return readNested(b, i, ddsFields, func(k, b []byte, i int) (int, bool) {
		switch string(k) {
		case "topology":
			return readText(b, i, &d.Topology)
		case "task_path":
			return readText(b, i, &d.TaskPath)
		case "task_id":
			return readText(b, i, &d.TaskID)
		case "task_index":
			return readInt(b, i, &d.TaskIndex)
		case "collection_index":
			return readInt(b, i, &d.CollectionIndex)
		case "task_name":
			return readText(b, i, &d.TaskName)
		case "group_name":
			return readText(b, i, &d.GroupName)
		case "collection_name":
			return readText(b, i, &d.CollectionName)
		case "collection_path":
			return readText(b, i, &d.CollectionPath)
		case "exe":
			return readText(b, i, &d.Exe)
		case "exe_reachable":
			return readBool(b, i, &d.ExeReachable)
		case "env_script":
			return readText(b, i, &d.EnvScript)
		case "env_reachable":
			return readBool(b, i, &d.EnvReachable)
		case "properties":
			return readList(b, i, &d.Properties, objectOf(ddsPropertyFields, func(k, b []byte, i int, p *DDSProperty) (int, bool) {
				switch string(k) {
				case "name":
					return readText(b, i, &p.Name)
				case "access":
					return readText(b, i, &p.Access)
				case "scope":
					return readText(b, i, &p.Scope)
				}
				return i, false
			}))
		case "assets":
			return readList(b, i, &d.Assets, objectOf(ddsAssetFields, func(k, b []byte, i int, a *DDSAsset) (int, bool) {
				switch string(k) {
				case "name":
					return readText(b, i, &a.Name)
				case "type":
					return readText(b, i, &a.Type)
				case "visibility":
					return readText(b, i, &a.Visibility)
				case "value":
					return readText(b, i, &a.Value)
				}
				return i, false
			}))
		case "vars":
			return readTextMap(b, i, &d.Vars)
		case "requirements":
			return readList(b, i, &d.Requirements, objectOf(ddsRequirementFields, func(k, b []byte, i int, r *DDSRequirement) (int, bool) {
				switch string(k) {
				case "name":
					return readText(b, i, &r.Name)
				case "type":
					return readText(b, i, &r.Type)
				case "value":
					return readText(b, i, &r.Value)
				}
				return i, false
			}))
		case "triggers":
			return readList(b, i, &d.Triggers, objectOf(ddsTriggerFields, func(k, b []byte, i int, t *DDSTrigger) (int, bool) {
				switch string(k) {
				case "name":
					return readText(b, i, &t.Name)
				case "condition":
					return readText(b, i, &t.Condition)
				case "action":
					return readText(b, i, &t.Action)
				case "arg":
					return readText(b, i, &t.Arg)
				}
				return i, false
			}))
		}
		return i, false
	})
}

// readFileCopies reads a staging list into a fresh *dst.
func readFileCopies(b []byte, i int, dst *[]FileCopy) (int, bool) {
	return readList(b, i, dst, objectOf(fileCopyFields, func(k, b []byte, i int, c *FileCopy) (int, bool) {
		switch string(k) {
		case "from":
			return readText(b, i, &c.From)
		case "to":
			return readText(b, i, &c.To)
		case "directory":
			return readBool(b, i, &c.Directory)
		case "attempts":
			return readInt(b, i, &c.Attempts)
		case "when":
			return readText(b, i, &c.When)
		}
		return i, false
	}))
}

// readRequirements reads today's requirements (strictly; attributes or a first-schema
// field give up).
func readRequirements(b []byte, i int, r *Requirements) (int, bool) {
	return readNested(b, i, requirementFields, func(k, b []byte, i int) (int, bool) {
		switch string(k) {
		case "lrms_default":
			return readText(b, i, (*string)(&r.LRMSDefault))
		case "queue":
			return readText(b, i, &r.Queue)
		case "os_name":
			return readText(b, i, &r.OSName)
		case "os_release":
			return readText(b, i, &r.OSRelease)
		case "os_version":
			return readText(b, i, &r.OSVersion)
		case "platform":
			return readText(b, i, &r.Platform)
		case "cpu_instruction_set":
			return readText(b, i, &r.CPUInstructionSet)
		case "smp_size":
			return readInt(b, i, &r.SMPSize)
		case "processors":
			return readInt(b, i, &r.Processors)
		case "ram_size":
			return readInt(b, i, &r.RAMSize)
		case "virtual_size":
			return readInt(b, i, &r.VirtualSize)
		case "cpu_hz":
			return readInt(b, i, &r.CPUHz)
		case "origins":
			return readMap(b, i, &r.Origins, func(b []byte, i int) (Origin, int, bool) {
				var o Origin
				end, ok := readOrigin(b, i, &o)
				return o, end, ok
			})
		case "host_names":
			return readList(b, i, &r.Hosts, readNameRequirement)
		case "target_names":
			return readList(b, i, &r.Targets, readNameRequirement)
		case "lrms_rules":
			return readList(b, i, &r.LRMS, objectOf(lrmsRuleFields, func(k, b []byte, i int, l *LRMSRule) (int, bool) {
				switch string(k) {
				case "is":
					return readText(b, i, &l.Is)
				case "is_not":
					return readText(b, i, &l.IsNot)
				case "from":
					return readOrigin(b, i, &l.From)
				}
				return i, false
			}))
		case "software":
			return readList(b, i, &r.Software, objectOf(softwareFields, func(k, b []byte, i int, c *SoftwareConstraint) (int, bool) {
				switch string(k) {
				case "name":
					return readText(b, i, &c.Name)
				case "op":
					return readText(b, i, &c.Op)
				case "version":
					return readText(b, i, &c.Version)
				case "from":
					return readOrigin(b, i, &c.From)
				}
				return i, false
			}))
		case "placement":
			return readPointer(b, i, &r.Placement, objectOf(placementFields, func(k, b []byte, i int, p *HostPlacement) (int, bool) {
				switch string(k) {
				case "together":
					return readText(b, i, &p.Together)
				case "spread":
					return readText(b, i, &p.Spread)
				case "index":
					return readInt(b, i, &p.Index)
				case "max_per_host":
					return readInt(b, i, &p.MaxPerHost)
				case "from":
					return readOrigin(b, i, &p.From)
				}
				return i, false
			}))
		case "unsupported":
			return readList(b, i, &r.Unsupported, objectOf(unsupportedFields, func(k, b []byte, i int, u *UnsupportedRequirement) (int, bool) {
				switch string(k) {
				case "what":
					return readText(b, i, &u.What)
				case "from":
					return readOrigin(b, i, &u.From)
				}
				return i, false
			}))
		}
		return i, false
	})
}

// readOrigin reads where a requirement was written into *o (a nested object, as
// encoding/json fills a struct field: over what *o holds).
func readOrigin(b []byte, i int, o *Origin) (int, bool) {
	return readNested(b, i, originFields, func(k, b []byte, i int) (int, bool) {
		switch string(k) {
		case "field":
			return readText(b, i, &o.Field)
		case "line":
			return readInt(b, i, &o.Line)
		case "col":
			return readInt(b, i, &o.Col)
		}
		return i, false
	})
}

// readNameRequirement reads one host or target name requirement: its patterns and
// where it was written.
func readNameRequirement(b []byte, i int, n *NameRequirement) (int, bool) {
	return readNested(b, i, nameRequirementFields, func(k, b []byte, i int) (int, bool) {
		switch string(k) {
		case "any_of":
			return readList(b, i, &n.AnyOf, objectOf(namePatternFields, func(k, b []byte, i int, p *NamePattern) (int, bool) {
				switch string(k) {
				case "pattern":
					return readText(b, i, &p.Pattern)
				case "syntax":
					return readText(b, i, (*string)(&p.Syntax))
				}
				return i, false
			}))
		case "from":
			return readOrigin(b, i, &n.From)
		}
		return i, false
	})
}

// objectOf is a reader of a nested object into *v (strictly, as readNested), each member
// by read.
func objectOf[V any](names []string, read func(k, b []byte, i int, v *V) (int, bool)) func(b []byte, i int, v *V) (int, bool) {
	return func(b []byte, i int, v *V) (int, bool) {
		return readNested(b, i, names, func(k, b []byte, i int) (int, bool) { return read(k, b, i, v) })
	}
}

// readPointer reads the object or string at b[i] through a pointer field, as
// encoding/json does: into what *dst points to, made when nil. A null is given up on.
func readPointer[T any](b []byte, i int, dst **T, read func(b []byte, i int, v *T) (int, bool)) (int, bool) {
	if i >= len(b) || b[i] == 'n' {
		return i, false
	}
	if *dst == nil {
		*dst = new(T)
	}
	return read(b, i, *dst)
}

// readTime reads a time as encoding/json does, by time.Time's UnmarshalJSON on the raw
// string (which it does not unescape).
func readTime(b []byte, i int, t *time.Time) (int, bool) {
	end, ok := JSONStringEnd(b, i)
	if !ok || t.UnmarshalJSON(b[i:end]) != nil {
		return i, false
	}
	return end, true
}

// readPeriod reads an xs:duration as encoding/json does a TextUnmarshaler: the string,
// unescaped, to UnmarshalText.
func readPeriod(b []byte, i int, p *Period) (int, bool) {
	var s string
	end, ok := readText(b, i, &s)
	if !ok || p.UnmarshalText([]byte(s)) != nil {
		return i, false
	}
	return end, true
}

// readTexts reads an array of strings into *dst, a fresh slice as encoding/json makes
// one (an empty array too is a slice, not nil).
func readTexts(b []byte, i int, dst *[]string) (int, bool) { return readList(b, i, dst, readText) }

// readList reads the array at b[i] into a fresh *dst, each element by read into a zero
// value; a null is given up on, and so is a slice that already has elements (or room for
// them).
func readList[V any](b []byte, i int, dst *[]V, read func(b []byte, i int, v *V) (int, bool)) (int, bool) {
	if i >= len(b) || b[i] != '[' || cap(*dst) > 0 {
		// encoding/json decodes a list into the elements the slice already has (a
		// repeated key, a value decoded over), merging an object into the one there.
		return i, false
	}
	out := []V{}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		*dst = out
		return i + 1, true
	}
	var zero V
	for {
		out = append(out, zero)
		end, ok := read(b, i, &out[len(out)-1])
		if !ok {
			return end, false
		}
		if i = skipSpace(b, end); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			*dst = out
			return i + 1, true
		}
		return i, false
	}
}

// readBase64 reads a string of standard base64 into *dst, as encoding/json reads a
// []byte (an empty string is an empty slice, not nil); invalid base64 gives up.
func readBase64(b []byte, i int, dst *[]byte) (int, bool) {
	var s string
	end, ok := readText(b, i, &s)
	if !ok {
		return i, false
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(out, []byte(s))
	if err != nil {
		return i, false
	}
	*dst = out[:n]
	return end, true
}

// fastIncarnated reads an incarnation whole: every service that folds a job decodes
// one, and encoding/json's reflection over its scripts and maps was about 100 us of it.
// Its strings are scripts, so escapes are read (readText), not given up on.
func fastIncarnated(data []byte, p *IncarnatedData) bool {
	return readObject(data, incarnatedFields, false, func(k, b []byte, i int) (int, bool) {
		switch string(k) {
		case "cluster":
			return readText(b, i, &p.Cluster)
		case "queue":
			return readText(b, i, &p.Queue)
		case "lrms":
			return readText(b, i, &p.LRMS)
		case "profile":
			return readText(b, i, &p.Profile)
		case "profile_hash":
			return readText(b, i, &p.ProfileHash)
		case "work_dir":
			return readText(b, i, &p.WorkDir)
		case "host":
			return readText(b, i, &p.Host)
		case "native_id_pattern":
			return readText(b, i, &p.NativeIDPattern)
		case "status_pattern":
			return readText(b, i, &p.StatusPattern)
		case "absent_state":
			return readText(b, i, &p.AbsentState)
		case "scripts":
			return readScripts(b, i, &p.Scripts)
		case "static_scripts":
			return readScripts(b, i, &p.StaticScripts)
		case "native_states":
			return readTextMap(b, i, &p.NativeStates)
		case "substituted":
			return readTextMap(b, i, &p.Substituted)
		case "storages":
			return readTextMap(b, i, &p.Storages)
		}
		return i, false
	})
}

// readScripts reads an object of scripts by name into *dst, as encoding/json fills a
// map: made when nil, added to when not (a repeated key), each value a fresh Script.
func readScripts(b []byte, i int, dst *map[string]Script) (int, bool) {
	return readMap(b, i, dst, func(b []byte, i int) (Script, int, bool) {
		var sc Script
		end, ok := readMembers(b, i, scriptFields, false, func(k, b []byte, i int) (int, bool) {
			switch string(k) {
			case "body":
				return readText(b, i, &sc.Body)
			case "sha256":
				return readText(b, i, &sc.SHA256)
			case "location":
				return readText(b, i, &sc.Location)
			}
			return i, false
		})
		return sc, end, ok
	})
}

// readTextMap reads an object of strings into *dst, as readScripts does scripts.
func readTextMap(b []byte, i int, dst *map[string]string) (int, bool) {
	return readMap(b, i, dst, func(b []byte, i int) (string, int, bool) {
		var v string
		end, ok := readText(b, i, &v)
		return v, end, ok
	})
}

// readMap reads the object at b[i] into *dst, each member's value by read (which returns
// it, rather than filling a slot that would have to live on the heap); a null map is
// nil, as encoding/json makes it, and a null value is given up on.
func readMap[V any](b []byte, i int, dst *map[string]V, read func(b []byte, i int) (V, int, bool)) (int, bool) {
	if bytes.HasPrefix(b[i:], []byte("null")) {
		*dst = nil
		return i + 4, true
	}
	if i >= len(b) || b[i] != '{' {
		return i, false
	}
	if *dst == nil {
		*dst = map[string]V{}
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		var key string
		end, ok := readText(b, i, &key)
		if !ok {
			return i, false
		}
		if i = skipSpace(b, end); i >= len(b) || b[i] != ':' {
			return i, false
		}
		v, end, ok := read(b, skipSpace(b, i+1))
		if !ok {
			return end, false
		}
		(*dst)[key] = v
		if i = skipSpace(b, end); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		return i, false
	}
}

// readText reads a string into dst as encoding/json does, escapes and all; it gives up
// on what encoding/json would change (invalid UTF-8, a \u escape of a surrogate that is
// not half of a pair, each replaced by U+FFFD there) rather than make the change.
func readText(b []byte, i int, dst *string) (int, bool) {
	end, ok := JSONStringEnd(b, i) // the escapes are well formed from here on
	if !ok {
		return i, false
	}
	s := b[i+1 : end-1]
	esc := bytes.IndexByte(s, '\\')
	if !utf8.Valid(s) {
		return i, false
	}
	if esc < 0 {
		*dst = string(s)
		return end, true
	}
	var out strings.Builder
	out.Grow(len(s))
	for esc >= 0 {
		out.Write(s[:esc])
		c := s[esc+1]
		s = s[esc+2:]
		switch c {
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			r := hex4(s)
			s = s[4:]
			if utf16.IsSurrogate(r) { // a pair, or given up on
				if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
					return i, false
				}
				if r = utf16.DecodeRune(r, hex4(s[2:])); r == utf8.RuneError {
					return i, false
				}
				s = s[6:]
			}
			out.WriteRune(r)
		default: // " \\ /
			out.WriteByte(c)
		}
		esc = bytes.IndexByte(s, '\\')
	}
	out.Write(s)
	*dst = out.String()
	return end, true
}

// hex4 is the value of the four hexadecimal digits b starts with.
func hex4(b []byte) rune {
	var r rune
	for _, h := range b[:4] {
		switch {
		case h >= 'a':
			h -= 'a' - 10
		case h >= 'A':
			h -= 'A' - 10
		default:
			h -= '0'
		}
		r = r<<4 | rune(h)
	}
	return r
}

// The JSON names of each payload's fields, as encoding/json matches keys to them.
var (
	transferFields   = jsonNames(TransferData{})
	startedFields    = jsonNames(StartedData{})
	statusFields     = jsonNames(StatusData{})
	exitedFields     = jsonNames(ExitedData{})
	stagedOutFields  = jsonNames(StagedOutData{})
	endFields        = jsonNames(EndData{})
	noteFields       = jsonNames(Note{})
	restartedFields  = jsonNames(RestartedData{})
	incarnatedFields = jsonNames(IncarnatedData{})
	scriptFields     = jsonNames(Script{})
	jobFields        = append(jsonNames(Job{}), "requirements")
	originalFields   = jsonNames(Original{})
	envFields        = jsonNames(EnvVar{})
	fileCopyFields   = jsonNames(FileCopy{})
	limitFields      = jsonNames(Limit{})
	originFields     = jsonNames(Origin{})
	// requirementFields are the names UnmarshalJSON reads requirements by: today's and
	// the first schema's (which fastJob gives up on).
	requirementFields = append(jsonNames(Requirements{}), jsonNames(requirementsV1{})...)
	ddsFields         = jsonNames(DDSContext{})
	ddsPropertyFields = jsonNames(DDSProperty{})
	ddsAssetFields    = jsonNames(DDSAsset{})

	ddsRequirementFields  = jsonNames(DDSRequirement{})
	ddsTriggerFields      = jsonNames(DDSTrigger{})
	idRangeFields         = jsonNames(IDRange{})
	coallocationFields    = jsonNames(Coallocation{})
	applicationFields     = jsonNames(Application{})
	lrmsRuleFields        = jsonNames(LRMSRule{})
	softwareFields        = jsonNames(SoftwareConstraint{})
	placementFields       = jsonNames(HostPlacement{})
	unsupportedFields     = jsonNames(UnsupportedRequirement{})
	nameRequirementFields = jsonNames(NameRequirement{})
	namePatternFields     = jsonNames(NamePattern{})
)

// jsonNames lists the JSON names of a struct's exported fields (its tag's name, else the
// field's), the fields of embedded structs among them.
func jsonNames(v any) []string {
	var names []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-" || !f.IsExported() && !f.Anonymous:
			case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
				walk(f.Type)
			case name == "":
				names = append(names, f.Name)
			default:
				names = append(names, name)
			}
		}
	}
	walk(reflect.TypeOf(v))
	return names
}

// memberReader reads the value of member k starting at b[i] and returns the index after
// it; false when it does not read that value (or k) plainly.
type memberReader func(k, b []byte, i int) (int, bool)

// readObject reads data, one JSON object and nothing else, member by member: a key
// spelt exactly as a field's name goes to read; a key that is no field's name in any
// case is skipped (strict: given up on, as DisallowUnknownFields refuses it); anything
// else is given up on.
func readObject(data []byte, names []string, strict bool, read memberReader) bool {
	end, ok := readMembers(data, skipSpace(data, 0), names, strict, read)
	return ok && skipSpace(data, end) == len(data)
}

// readNested reads the object at b[i] into a nested struct, strictly (a job's).
func readNested(b []byte, i int, names []string, read memberReader) (int, bool) {
	return readMembers(b, i, names, true, read)
}

func readMembers(b []byte, i int, names []string, strict bool, read memberReader) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return i, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		end, ok := JSONStringEnd(b, i)
		if !ok {
			return i, false
		}
		key := b[i+1 : end-1]
		if i = skipSpace(b, end); i >= len(b) || b[i] != ':' {
			return i, false
		}
		i = skipSpace(b, i+1)
		if i, ok = readMember(key, b, i, names, strict, read); !ok {
			return i, false
		}
		if i = skipSpace(b, i); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		return i, false
	}
}

// readMember reads one member's value, or skips it when its key names no field.
func readMember(key, b []byte, i int, names []string, strict bool, read memberReader) (int, bool) {
	for _, c := range key {
		if c == '\\' || c >= utf8.RuneSelf { // escaped, or folding to a name only in Unicode
			return i, false
		}
	}
	for _, n := range names {
		if string(key) == n {
			return read(key, b, i)
		}
	}
	for _, n := range names {
		if strings.EqualFold(string(key), n) {
			return i, false
		}
	}
	if strict {
		return i, false
	}
	return JSONValueEnd(b, i)
}

// readString reads a string without escapes, in valid UTF-8 (encoding/json replaces
// invalid bytes), into dst.
func readString(b []byte, i int, dst *string) (int, bool) {
	end, ok := JSONStringEnd(b, i)
	if !ok {
		return i, false
	}
	s := b[i+1 : end-1]
	var high byte
	for _, c := range s {
		if c == '\\' {
			return i, false
		}
		high |= c
	}
	if high >= utf8.RuneSelf && !utf8.Valid(s) {
		return i, false
	}
	*dst = string(s)
	return end, true
}

// readInt reads an integer (an optional minus and at most 18 digits, so that it fits
// any of the payloads' integer fields; no fraction or exponent) into dst.
func readInt[T ~int | ~int64](b []byte, i int, dst *T) (int, bool) {
	j := i
	neg := j < len(b) && b[j] == '-'
	if neg {
		j++
	}
	start := j
	var n int64
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		n = n*10 + int64(b[j]-'0')
		j++
	}
	digits := j - start
	if digits == 0 || digits > 18 || digits > 1 && b[start] == '0' ||
		j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return i, false
	}
	if neg {
		n = -n
	}
	*dst = T(n)
	return j, true
}

// readBool reads true or false into dst.
func readBool(b []byte, i int, dst *bool) (int, bool) {
	switch {
	case bytes.HasPrefix(b[i:], []byte("true")):
		*dst = true
		return i + 4, true
	case bytes.HasPrefix(b[i:], []byte("false")):
		*dst = false
		return i + 5, true
	}
	return i, false
}

// payloadOf decodes e's data into *v as e.Payload does. A plain payload (fastPayload)
// is read straight into v, which stays where the caller keeps it; only one that
// encoding/json must read goes through a copy on the heap. A fold decodes a payload for
// almost every event, and Payload's interface made each of them an allocation.
func payloadOf[T any](e *Event, v *T) error {
	if fastPayload(e.Data, v) {
		return nil
	}
	h := new(T)
	*h = *v
	if err := e.Payload(h); err != nil {
		return err
	}
	*v = *h
	return nil
}
