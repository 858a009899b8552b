package dds

import (
	"errors"
	"path"
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/shellquote"
)

// expander walks main the way DDS does (CTopoCore::FillIdToTopoElementMap): every group
// n times in order, a counter per static path giving each task and collection instance
// its index, and tasks of a collection numbered within their collection instance.
type expander struct {
	t    *topology
	emit func(*events.Job) error
	err  error // emit's first error: expansion stops
	slot int   // instances emitted so far
	// counters hold the next index of each static path outside collections. A
	// collection instance numbers its tasks with counters of its own (inCollection),
	// its path being its own.
	counters map[string]*int
	// units counts the instances of each task outside collections and of each
	// collection, as DDS's scheduler counts them against maxinstances.
	taskUnits       map[*task]int
	collectionUnits map[*collection]int
	inCollection    []entryCounter
	// ids computes the task IDs of a task's instances from its 64th on (suffixCRC).
	ids map[*task]*taskIDs
	// job is the instance being emitted, one struct for all (a job is 960 bytes; emit
	// copies what it keeps).
	job events.Job
	// shared: the instance's DDS context, environment, arguments and placement are
	// these, overwritten by the next instance too (EachShared).
	shared     bool
	dds        events.DDSContext
	env        []events.EnvVar
	args       []string
	together   events.HostPlacement // a collection instance's
	alonePlace events.HostPlacement
}

// entryCounter is the next index of one task name inside the current collection instance.
type entryCounter struct {
	task string
	next int
}

func expand(t *topology, shared bool, emit func(*events.Job) error) error {
	e := &expander{t: t, emit: emit, shared: shared, counters: map[string]*int{}, taskUnits: map[*task]int{}, collectionUnits: map[*collection]int{},
		ids: map[*task]*taskIDs{}}
	e.group(&t.main, t.mainName)
	return e.err
}

// taskIDs counts a task's instances, and once there are many computes their IDs from
// their paths alone.
type taskIDs struct {
	n   int
	crc *suffixCRC
}

// suffixCRCFrom is the instance from which a task's IDs are computed by a suffixCRC:
// making one costs about as much as 64 IDs.
const suffixCRCFrom = 64

// taskID is taskID(taskPath, tk.hash).
func (e *expander) taskID(tk *task, taskPath string) string {
	ids := e.ids[tk]
	if ids == nil {
		ids = &taskIDs{}
		e.ids[tk] = ids
	}
	ids.n++
	if ids.crc == nil {
		if ids.n < suffixCRCFrom {
			return taskID(taskPath, tk.hash)
		}
		ids.crc = newSuffixCRC(tk.hash)
	}
	return strconv.FormatUint(ids.crc.of(taskPath), 10)
}

// counter is the index counter of a static path.
func (e *expander) counter(static string) *int {
	c := e.counters[static]
	if c == nil {
		c = new(int)
		e.counters[static] = c
	}
	return c
}

func (e *expander) group(g *group, path string) {
	// Each member's static path and counter, once: they are the same in every round.
	statics := make([]string, len(g.members))
	counters := make([]*int, len(g.members))
	for k, m := range g.members {
		if m.kind == "group" {
			statics[k] = path + "/" + m.group.name
			continue
		}
		statics[k] = path + "/" + m.name
		counters[k] = e.counter(statics[k])
	}
	for i := 0; i < g.n && e.err == nil; i++ {
		for k, m := range g.members {
			switch m.kind {
			case "task":
				tk := e.t.tasks[m.name]
				e.task(tk, statics[k], counters[k], g.name, nil, "", -1, e.alone(tk))
			case "collection":
				e.collection(e.t.collections[m.name], statics[k], counters[k], g.name)
			case "group":
				e.group(m.group, statics[k])
			}
		}
	}
}

func (e *expander) collection(c *collection, static string, counter *int, groupName string) {
	index := *counter
	*counter = index + 1
	cpath := static + "_" + strconv.Itoa(index)
	unit := e.collectionUnits[c]
	e.collectionUnits[c] = unit + 1
	place := e.placement(&e.together)
	*place = events.HostPlacement{Together: cpath, Spread: c.name, Index: unit, MaxPerHost: c.maxPerHost, From: c.maxFrom}
	// Paths under cpath are this instance's alone: its tasks count from 0, by name.
	e.inCollection = e.inCollection[:0]
	for _, en := range c.entries {
		ctr := e.entryCounter(en.task)
		for k := 0; k < en.n; k++ {
			e.task(e.t.tasks[en.task], cpath+"/"+en.task, ctr, groupName, c, cpath, index, place)
		}
	}
}

// entryCounter is the counter of a task name in the current collection instance.
func (e *expander) entryCounter(name string) *int {
	for i := range e.inCollection {
		if e.inCollection[i].task == name {
			return &e.inCollection[i].next
		}
	}
	e.inCollection = append(e.inCollection, entryCounter{task: name})
	return &e.inCollection[len(e.inCollection)-1].next
}

// alone is the placement of an instance of a task outside any collection: counted
// against the task's maxinstances, when it has one.
func (e *expander) alone(tk *task) *events.HostPlacement {
	if tk.maxPerHost == 0 {
		return nil
	}
	unit := e.taskUnits[tk]
	e.taskUnits[tk] = unit + 1
	place := e.placement(&e.alonePlace)
	*place = events.HostPlacement{Spread: tk.name, Index: unit, MaxPerHost: tk.maxPerHost, From: tk.maxFrom}
	return place
}

// placement is buf when instances share their parts, else a new placement.
func (e *expander) placement(buf *events.HostPlacement) *events.HostPlacement {
	if e.shared {
		return buf
	}
	return new(events.HostPlacement)
}

func (e *expander) task(tk *task, static string, counter *int, groupName string, c *collection, cpath string, cindex int, place *events.HostPlacement) {
	index := *counter
	*counter = index + 1
	taskPath := static + "_" + strconv.Itoa(index)
	ti := strconv.Itoa(index)
	ci := ""
	if c != nil {
		ci = strconv.Itoa(cindex)
	}
	id := e.taskID(tk, taskPath)
	if e.err != nil {
		return
	}
	slot := strconv.Itoa(e.slot)
	e.slot++
	ctx := &e.dds
	if !e.shared {
		ctx = new(events.DDSContext)
	}
	*ctx = events.DDSContext{Topology: e.t.name, TaskPath: taskPath, TaskID: id, TaskIndex: index, CollectionIndex: cindex,
		TaskName: tk.name, GroupName: groupName, CollectionPath: cpath,
		Exe: resolveTags(tk.exe, ti, ci), ExeReachable: tk.exeReachable,
		EnvScript: tk.env, EnvReachable: tk.envReachable, Properties: tk.properties,
		Requirements: tk.requirements, Triggers: tk.triggers, Assets: tk.assets}
	placement := tk.placement
	var env []events.EnvVar
	if e.shared {
		env = e.env[:0]
	} else {
		env = make([]events.EnvVar, 0, 10)
	}
	env = append(env, events.EnvVar{Name: "DDS_TASK_PATH", Value: taskPath},
		events.EnvVar{Name: "DDS_GROUP_NAME", Value: groupName})
	collName := ""
	if c != nil {
		// Inside a collection only the collection's requirements count, as DDS's
		// scheduler places a collection instance by them alone (the tasks' own are not
		// read there).
		ctx.CollectionName, collName = c.name, c.name
		ctx.Requirements, placement = c.requirements, c.placement
	}
	placement.Placement = place
	// DDS sets DDS_COLLECTION_NAME always, empty outside a collection (CommanderChannel.cpp).
	env = append(env, events.EnvVar{Name: "DDS_COLLECTION_NAME", Value: collName})
	env = append(env, events.EnvVar{Name: "DDS_TASK_NAME", Value: tk.name},
		events.EnvVar{Name: "DDS_TASK_INDEX", Value: ti})
	if c != nil {
		env = append(env, events.EnvVar{Name: "DDS_COLLECTION_INDEX", Value: ci})
	}
	env = append(env, events.EnvVar{Name: "DDS_SESSION_ID", Value: SessionPlaceholder},
		events.EnvVar{Name: "DDS_TASK_ID", Value: id},
		events.EnvVar{Name: "DDS_SLOT_ID", Value: slot},
		events.EnvVar{Name: "DDS_LOCATION", Value: LocationPlaceholder})
	var args []string
	if e.shared {
		args = e.args[:0]
	}
	exe, args := tk.command(ti, ci, args)
	if e.shared {
		e.env, e.args = env, args
	}
	e.job = events.Job{Name: taskPath, Executable: exe, StageIn: tk.stageIn,
		Arguments: args, Environment: env, DDS: ctx, Substitutions: ddsSubstitutions, Requirements: placement, Restarts: tk.restarts,
		Original: events.Original{Path: taskPath}}
	e.err = e.emit(&e.job)
}

var ddsSubstitutions = []string{"session", "dds_location"}

// command is the instance's program and arguments (appended to args). DDS's agent
// writes the exe line into a bash script (dds_user_task_wrapper.sh), after "source" and
// the env script when the task has one, and runs it: the line is bash's to read, with its $VAR expansions. A
// line with no expansion and no env script reads the same split into words and run
// directly, as here; otherwise the line (and the env script) go to bash -c as one
// argument, quoted like every word of the JOB script, so the expansion happens in the
// task's own shell and reaches no further than its command.
func (tk *task) command(ti, ci string, args []string) (string, []string) {
	if tk.shell {
		exe := tk.exe
		if tk.badQuote == nil {
			exe = tk.delivered(tk.exe, tk.exeReachable)
		}
		script := tk.assetFiles() + resolveTags(exe, ti, ci)
		if !tk.exeReachable && len(tk.words) > 0 {
			// A delivered copy is a plain file; DDS's agent makes its copy executable.
			script = "chmod u+x " + shellquote.Quote("./"+path.Base(tk.words[0])) + "\n" + script
		}
		if tk.env != "" {
			script = "source " + tk.delivered(tk.env, tk.envReachable) + "\n" + script
		}
		return "/bin/bash", append(args, "-c", script)
	}
	if args == nil {
		args = make([]string, 0, len(tk.words)-1)
	}
	for _, w := range tk.words[1:] {
		args = append(args, resolveTags(w, ti, ci))
	}
	return resolveTags(tk.words[0], ti, ci), args
}

// assetFiles writes the task's assets into its directory, each NAME.asset holding its
// value, as DDS's agent writes them before it starts the task (a global asset, which
// DDS keeps once per agent beside its installation, is written here too: gridwire
// installs nothing on the host).
func (tk *task) assetFiles() string {
	var b strings.Builder
	for _, a := range tk.assets {
		b.WriteString("printf %s " + shellquote.Quote(a.Value) + " >" + shellquote.Quote(a.Name+".asset") + "\n")
	}
	return b.String()
}

// delivered is an exe or env line whose first word names a file the stager delivers
// into the job's directory (reachable="false"), rewritten to run that copy, as DDS's
// commander rewrites it to its copy in the agent's slot directory.
func (tk *task) delivered(line string, reachable bool) string {
	if reachable {
		return line
	}
	first := strings.Fields(line)[0]
	return shellquote.Quote("./"+path.Base(first)) + strings.TrimPrefix(line, first)
}

// deliveries are the stage-ins of the files the task's unreachable exe and env name.
func (tk *task) deliveries() []events.FileCopy {
	var out []events.FileCopy
	if !tk.exeReachable {
		out = append(out, events.FileCopy{From: tk.words[0], To: path.Base(tk.words[0])})
	}
	if tk.env != "" && !tk.envReachable {
		first := strings.Fields(tk.env)[0]
		out = append(out, events.FileCopy{From: first, To: path.Base(first)})
	}
	return out
}

// resolveTags replaces %taskIndex% and, inside a collection, %collectionIndex%. Outside
// a collection DDS leaves %collectionIndex% as written, and so does this.
func resolveTags(s, taskIndex, collectionIndex string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	s = strings.ReplaceAll(s, "%taskIndex%", taskIndex)
	if collectionIndex != "" {
		s = strings.ReplaceAll(s, "%collectionIndex%", collectionIndex)
	}
	return s
}

// splitWords splits an exe line into words as a POSIX shell would without expansion:
// blanks separate, single quotes keep everything, double quotes keep all but \" \\ \$ \`,
// a backslash outside quotes escapes the next character.
func splitWords(s string) ([]string, error) {
	var words []string
	var b strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, b.String())
				b.Reset()
				inWord = false
			}
			continue
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			j, err := doubleQuoted(s, i+1, &b)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		default:
			b.WriteByte(c)
		}
		inWord = true
	}
	if inWord {
		words = append(words, b.String())
	}
	if len(words) == 0 {
		return nil, errors.New("is empty")
	}
	return words, nil
}

// doubleQuoted copies a double-quoted run starting at i into b; it returns the index of
// the closing quote.
func doubleQuoted(s string, i int, b *strings.Builder) (int, error) {
	for ; i < len(s); i++ {
		c := s[i]
		if c == '"' {
			return i, nil
		}
		if c == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
			i++
			c = s[i]
		}
		b.WriteByte(c)
	}
	return 0, errors.New("unterminated double quote")
}
