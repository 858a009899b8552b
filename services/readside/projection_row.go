package readside

import (
	"math"
	"time"
	"unique"

	"github.com/gridwire/gridwire/events"
	"github.com/oklog/ulid/v2"
)

// row is a Row as the table holds it: only what the job table and a job's view show and
// the fold reads, packed. A table of a million jobs must fit beside the NATS server in a
// few hundred MiB, and a row as an events.State (about 400 bytes of struct, a 944-byte
// job, a stage-out's struct, each time with its location) cost 0.9 KB a job.
//
//   - The strings many jobs share (cluster, queue, native state, host and its key,
//     submitter, parent, DDS collection, reason) are interned (unique.Make: one copy
//     each in the process, dropped once no row holds it), 8 bytes a field.
//   - Status, held-from state and kind are a byte each; the four times are Unix
//     nanoseconds; the last event's ID is its 16-byte ULID; flags are bits.
//   - What few jobs have (earlier attempts, a group's summary) and any value that does
//     not pack (a time not in UTC or outside the nanosecond range, an unknown status or
//     kind, an event ID that is not a canonical ULID, a number past 32 bits, a job ID in
//     the job that differs from the row's) lives in ext, nil for almost every job.
//
// state gives back exactly the Row it was made from: the API's answers, the KV row and
// a replay's comparison do not change (TestRowRoundTrip).
type row struct {
	id       string // the job ID (the table's map key shares its bytes)
	nativeID string
	name     string
	path     string // the job's place in its document or session
	lastSeq  uint64
	times    [4]int64 // submitted, started, ended, updated: Unix ns (see flagTime)
	cluster, queue, nativeState, host, hostKey, reason,
	submitter, parent, collection sym
	stagedOut              unique.Handle[stagedOut] // when the StagedOut has no lists (flagStagedOut)
	dirDeleted             *events.DirectoryDeletedData
	lastID                 ulid.ULID
	events, restarts, exit int32
	status, heldFrom, kind uint8
	flags                  uint32
	ext                    *rowExt
}

// rowExt holds what a row keeps for few jobs, and the values that do not pack.
type rowExt struct {
	attempts  []events.Attempt
	group     *events.GroupSummary
	stagedOut *events.StagedOutData // one with lists (failed or cleaned names)
	// Set when the packed field does not hold the value (flagOddTimes, ...).
	status, heldFrom events.Status
	kind             events.Kind
	times            [4]time.Time
	lastID, jobID    string
	events, restarts int
	exit             int
}

const (
	flagJob             = 1 << iota // the row has its job's summary
	flagExit                        // ExitCode is set
	flagStagedOut                   // StagedOut is the stagedOut handle's
	flagStatusUnknown               // the State's four request flags
	flagCancelRequested             //
	flagHoldRequested               //
	flagResumeRequested             //
	flagOddTimes                    // the times are ext.times
	flagOddLastID                   // LastID is ext.lastID
	flagOddNumbers                  // Events, Restarts and ExitCode are ext's
	flagOddJobID                    // the job's ID is ext.jobID
	flagTime                        // bits flagTime<<i: times[i] is set (not the zero time)
)

// stagedOut is a StagedOutData without its lists, as interned: most jobs' stage-outs are
// one of a few ({ok}, {ok, 1 file}).
type stagedOut struct {
	ok     bool
	reason string
	files  int
}

// sym is an interned string: the zero sym is "".
type sym struct{ h unique.Handle[string] }

func intern(s string) sym {
	if s == "" {
		return sym{}
	}
	return sym{unique.Make(s)}
}

func (s sym) String() string {
	if s == (sym{}) {
		return ""
	}
	return s.h.Value()
}

// reintern is intern(s), reusing old when it holds s already (a fold changes few of a
// row's fields, and comparing to the old value is cheaper than interning again).
func reintern(old sym, s string) sym {
	if old.String() == s {
		return old
	}
	return intern(s)
}

// statuses are the packed states: a status's code is its index, 0xff one of its own.
var statuses = [...]events.Status{events.StatusNone, events.StatusSubmitted, events.StatusIncarnated, events.StatusStagingIn,
	events.StatusQueued, events.StatusRunning, events.StatusHeld, events.StatusStagingOut, events.StatusSucceeded,
	events.StatusFailed, events.StatusCancelled}

const oddCode = 0xff

func statusCode(s events.Status) uint8 {
	for i, k := range statuses {
		if k == s {
			return uint8(i)
		}
	}
	return oddCode
}

var kinds = [...]events.Kind{"", events.KindGroup}

func kindCode(k events.Kind) uint8 {
	for i, c := range kinds {
		if c == k {
			return uint8(i)
		}
	}
	return oddCode
}

// compact reduces a folded state to its row.
func compact(st events.State) row { return (&row{}).next(st) }

// next is the row of st, a state folded from r: it reuses r's interned strings where st
// holds the same.
func (r *row) next(st events.State) row {
	n := row{id: st.JobID, nativeID: st.NativeID, lastSeq: st.LastSeq,
		cluster: reintern(r.cluster, st.Cluster), queue: reintern(r.queue, st.Queue),
		nativeState: reintern(r.nativeState, st.NativeState), host: reintern(r.host, st.Host),
		hostKey: reintern(r.hostKey, st.HostKey), reason: reintern(r.reason, st.Reason)}
	if r.id == st.JobID {
		n.id = r.id
	}
	var ext rowExt
	odd := false
	if n.status = statusCode(st.Status); n.status == oddCode {
		ext.status, odd = st.Status, true
	}
	if n.heldFrom = statusCode(st.HeldFrom); n.heldFrom == oddCode {
		ext.heldFrom, odd = st.HeldFrom, true
	}
	if len(st.Attempts) > 0 || st.Group != nil {
		ext.attempts, ext.group, odd = st.Attempts, st.Group, true
	}
	times := [4]time.Time{st.SubmittedAt, st.StartedAt, st.EndedAt, st.UpdatedAt}
	for i, t := range times {
		ns, ok := packTime(t)
		if !ok {
			n.flags |= flagOddTimes
			ext.times, odd = times, true
			n.times = [4]int64{}
			break
		}
		if !t.IsZero() {
			n.flags |= flagTime << i
		}
		n.times[i] = ns
	}
	if canonicalULID(st.LastID) {
		n.lastID = ulid.MustParseStrict(st.LastID)
	} else if st.LastID != "" {
		n.flags |= flagOddLastID
		ext.lastID, odd = st.LastID, true
	}
	exit := 0
	if st.ExitCode != nil {
		n.flags |= flagExit
		exit = *st.ExitCode
	}
	restarts := 0
	if j := st.Job; j != nil {
		n.flags |= flagJob
		n.name, n.path, restarts = j.Name, j.Original.Path, j.Restarts
		if r.name == j.Name {
			n.name = r.name
		}
		if r.path == j.Original.Path {
			n.path = r.path
		}
		n.submitter, n.parent = reintern(r.submitter, j.Submitter), reintern(r.parent, j.Parent)
		if j.DDS != nil {
			n.collection = reintern(r.collection, j.DDS.CollectionPath)
		}
		if n.kind = kindCode(j.Kind); n.kind == oddCode {
			ext.kind, odd = j.Kind, true
		}
		if j.ID != st.JobID {
			n.flags |= flagOddJobID
			ext.jobID, odd = j.ID, true
		}
	}
	if !fits32(st.Events) || !fits32(restarts) || !fits32(exit) {
		n.flags |= flagOddNumbers
		ext.events, ext.restarts, ext.exit, odd = st.Events, restarts, exit, true
	} else {
		n.events, n.restarts, n.exit = int32(st.Events), int32(restarts), int32(exit)
	}
	if so := st.StagedOut; so != nil && so.Failed == nil && so.Cleaned == nil {
		n.flags |= flagStagedOut
		n.stagedOut = r.stagedOut
		if !r.has(flagStagedOut) || r.stagedOut.Value() != (stagedOut{so.OK, so.Reason, so.Files}) {
			n.stagedOut = unique.Make(stagedOut{so.OK, so.Reason, so.Files})
		}
	} else if so != nil {
		ext.stagedOut, odd = so, true
	}
	n.dirDeleted = st.DirectoryDeleted
	for _, f := range [...]struct {
		set  bool
		flag uint32
	}{{st.StatusUnknown, flagStatusUnknown}, {st.CancelRequested, flagCancelRequested},
		{st.HoldRequested, flagHoldRequested}, {st.ResumeRequested, flagResumeRequested}} {
		if f.set {
			n.flags |= f.flag
		}
	}
	if odd {
		e := ext // on the heap only here
		n.ext = &e
	}
	return n
}

func fits32(n int) bool { return n >= math.MinInt32 && n <= math.MaxInt32 }

// packTime is t as Unix nanoseconds, when that gives t back exactly: a time in UTC
// (as every time decoded from an event is) between 1678 and 2262, or the zero time.
func packTime(t time.Time) (int64, bool) {
	if t.IsZero() {
		return 0, true
	}
	if t.Location() != time.UTC || t.Year() < 1678 || t.Year() > 2261 {
		return 0, false
	}
	ns := t.UnixNano()
	return ns, time.Unix(0, ns).UTC() == t
}

// canonicalULID reports whether s is a ULID as ulid.ULID.String writes it (parsing it
// and writing it again gives s).
func canonicalULID(s string) bool {
	if len(s) != ulid.EncodedSize || s[0] > '7' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !ulidDigit[s[i]] {
			return false
		}
	}
	return true
}

// ulidDigit holds the digits of ULID's alphabet (Crockford's base 32, upper case).
var ulidDigit = func() (d [256]bool) {
	for _, c := range "0123456789ABCDEFGHJKMNPQRSTVWXYZ" {
		d[c] = true
	}
	return d
}()

// seq is the stream sequence of the row's last event.
func (r *row) seq() uint64 { return r.lastSeq }

func (r *row) statusOf() events.Status {
	if r.status == oddCode {
		return r.ext.status
	}
	return statuses[r.status]
}

func (r *row) has(f uint32) bool { return r.flags&f != 0 }

// time is the row's i-th time (submitted, started, ended, updated).
func (r *row) time(i int) time.Time {
	switch {
	case r.has(flagOddTimes):
		return r.ext.times[i]
	case r.flags&(flagTime<<i) == 0:
		return time.Time{}
	}
	return time.Unix(0, r.times[i]).UTC()
}

// state is the row as a Row, with a job of its own.
func (r *row) state() Row {
	st := r.foldState(nil)
	if r.has(flagOddLastID) {
		st.LastID = r.ext.lastID
	} else if r.lastID != (ulid.ULID{}) {
		st.LastID = r.lastID.String()
	}
	return st
}

// foldState is the row as the state a fold starts from: its job written into job (a new
// one when nil), and without the last event's ID, which the fold replaces and never reads.
func (r *row) foldState(job *events.Job) events.State {
	st := events.State{JobID: r.id, Status: r.statusOf(), Cluster: r.cluster.String(), Queue: r.queue.String(),
		NativeID: r.nativeID, NativeState: r.nativeState.String(), Host: r.host.String(), HostKey: r.hostKey.String(),
		Reason: r.reason.String(), StatusUnknown: r.has(flagStatusUnknown), CancelRequested: r.has(flagCancelRequested),
		HoldRequested: r.has(flagHoldRequested), ResumeRequested: r.has(flagResumeRequested),
		SubmittedAt: r.time(0), StartedAt: r.time(1), EndedAt: r.time(2), UpdatedAt: r.time(3),
		Events: int(r.events), LastSeq: r.lastSeq}
	restarts, exit := int(r.restarts), int(r.exit)
	if r.has(flagOddNumbers) {
		st.Events, restarts, exit = r.ext.events, r.ext.restarts, r.ext.exit
	}
	if r.heldFrom == oddCode {
		st.HeldFrom = r.ext.heldFrom
	} else {
		st.HeldFrom = statuses[r.heldFrom]
	}
	if r.has(flagExit) {
		st.ExitCode = &exit
	}
	if r.has(flagStagedOut) {
		so := r.stagedOut.Value()
		st.StagedOut = &events.StagedOutData{OK: so.ok, Reason: so.reason, Files: so.files}
	}
	st.DirectoryDeleted = r.dirDeleted
	if r.ext != nil {
		st.Attempts, st.Group = r.ext.attempts, r.ext.group
		if r.ext.stagedOut != nil {
			st.StagedOut = r.ext.stagedOut
		}
	}
	if r.has(flagJob) {
		s := jobSummary{id: r.id, name: r.name, submitter: r.submitter.String(), parent: r.parent.String(),
			restarts: restarts, path: r.path, collection: r.collection.String()}
		if r.has(flagOddJobID) {
			s.id = r.ext.jobID
		}
		if r.kind == oddCode {
			s.kind = r.ext.kind
		} else {
			s.kind = kinds[r.kind]
		}
		st.Job = s.fill(job)
	}
	return st
}
