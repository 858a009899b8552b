package incarnator

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/shellquote"
	"github.com/gridwire/gridwire/pkg/substitute"
	"github.com/gridwire/gridwire/services/incarnator/profile"
)

// Special fields the gateway provides to templates. Run-time values are shell variables
// the runner (or the job script itself) sets: they are written as variable expansions,
// never as text. Job values (QUEUE ... ARGUMENTS) are untrusted and written quoted.
var specialNames = map[string]bool{
	"USER_NAME": true, "WORKING_DIRECTORY": true, "WORK_ROOT": true, "SSH:HOST": true, "SSH:PORT": true,
	"JOB_ID": true, "NATIVE_ID": true, "NATIVE_IDS": true, "JOB_SCRIPT": true, "FILE": true, "LRMS": true,
	"QUEUE": true, "JOB_NAME": true, "COUNT": true, "WALLTIME": true, "WALLTIME_MINUTES": true,
	"EXECUTABLE": true, "ARGUMENTS": true, "TARGET": true, "FILE_NAME": true, "START_TIME": true, "START_TIME_PBS": true,
}

// runtimeNames are the special fields whose value only the target knows (USER_NAME
// when the cluster's config names no user): a two-level replacement on one runs there.
var runtimeNames = map[string]bool{
	"USER_NAME": true, "WORKING_DIRECTORY": true, "JOB_ID": true, "NATIVE_ID": true,
	"NATIVE_IDS": true, "JOB_SCRIPT": true, "FILE": true,
}

const infoPrefix = "TargetSystemInfo:"

// storagePrefix names a storage's path in a template: <STORAGE:HOME>.
const storagePrefix = "STORAGE:"

func isSpecial(name string) bool {
	return specialNames[name] || strings.HasPrefix(name, infoPrefix) || strings.HasPrefix(name, "SSH:") ||
		strings.HasPrefix(name, storagePrefix)
}

// renderCtx renders one job's templates on one target. With job nil it is a probe:
// it renders what needs no job value and notes when something does.
type renderCtx struct {
	t     *target
	job   *events.Job
	queue string
	exe   string
	args  []string
	extra map[string]profile.Value // per-template fields: TARGET, ARGUMENTS, FILE_NAME
	// reserved are the run-time names (events.RuntimeValues) the JOB script fills on the target.
	reserved map[string]bool
	// jobDependent is set when a probe render needed a job value.
	jobDependent bool
	// storages are the job's storage paths and wd its working directory (USPACE);
	// storing marks a storage being rendered (one naming another storage is refused).
	storages *storagePaths
	wd       string
	storing  bool
}

func (c *renderCtx) sources() profile.Sources {
	return profile.Sources{Special: c.special, Operator: c.operator, Job: c.jobField}
}

func trusted(s string) profile.Value { return profile.Value{Text: s, Trusted: true} }

// runtimeValue is a value only the target knows, as the shell expansion that yields it: a
// plain replacement writes the expansion in double quotes, a two-level one applies its
// regular expression to the expanded value on the target.
func runtimeValue(expr string) profile.Value {
	return profile.Value{Text: `"` + expr + `"`, Trusted: true, Runtime: expr}
}

func (c *renderCtx) special(name string) (profile.Value, bool) {
	if v, ok := c.extra[name]; ok {
		return v, true
	}
	switch name {
	case "USER_NAME":
		if c.t.cl.User != "" {
			return trusted(c.t.cl.User), true
		}
		return runtimeValue(`${LOGNAME:-$(id -un)}`), true
	case "WORKING_DIRECTORY":
		return runtimeValue(`$` + events.VarWorkDir), true
	case "WORK_ROOT":
		return trusted(c.t.root), true
	case "JOB_ID":
		return runtimeValue(`$` + events.VarJobID), true
	case "NATIVE_ID":
		return runtimeValue(`$` + events.VarNativeID), true
	case "NATIVE_IDS":
		return profile.Value{Text: `$` + events.VarNativeIDList, Trusted: true, Runtime: `$` + events.VarNativeIDList, Split: true}, true
	case "JOB_SCRIPT":
		return profile.Value{Text: `"$` + events.VarWorkDir + `"/` + events.ScriptFile, Trusted: true, Runtime: `$` + events.VarWorkDir + `/` + events.ScriptFile}, true
	case "FILE":
		return runtimeValue(`${GW_PATH:-$` + events.VarWorkDir + `}`), true
	case "LRMS":
		return trusted(c.t.cl.LRMS), true
	case "SSH:HOST", "SSH:PORT":
		return c.ssh(name)
	}
	if s, ok := strings.CutPrefix(name, storagePrefix); ok {
		return c.storage(s)
	}
	if strings.HasPrefix(name, infoPrefix) {
		v, ok := infoValue(&c.t.cl.Info, strings.TrimPrefix(name, infoPrefix))
		return trusted(v), ok
	}
	if !specialNames[name] {
		return profile.Value{}, false
	}
	if c.job == nil {
		c.jobDependent = true
		return profile.Value{Text: "0"}, true
	}
	return c.jobValue(name), true
}

func (c *renderCtx) ssh(name string) (profile.Value, bool) {
	if c.t.cl.Kind != cluster.KindSSH || len(c.t.cl.Hosts) == 0 {
		return profile.Value{}, false
	}
	h := c.t.cl.Hosts[0]
	host, port := splitHost(h), "22"
	if rest := strings.TrimPrefix(h, host); strings.HasPrefix(strings.TrimPrefix(rest, "]"), ":") {
		port = strings.TrimPrefix(strings.TrimPrefix(rest, "]"), ":")
	}
	if name == "SSH:HOST" {
		return trusted(host), true
	}
	return trusted(port), true
}

// jobValue is an untrusted value taken from the job.
func (c *renderCtx) jobValue(name string) profile.Value {
	j := c.job
	switch name {
	case "QUEUE":
		return profile.Value{Text: c.queue}
	case "JOB_NAME":
		if j.Name != "" {
			return profile.Value{Text: j.Name}
		}
		return profile.Value{Text: j.ID}
	case "COUNT":
		return profile.Value{Text: strconv.Itoa(max(j.Count, 1))}
	case "WALLTIME":
		return profile.Value{Text: strconv.FormatInt(int64(j.Duration.Seconds()), 10)}
	case "WALLTIME_MINUTES":
		return profile.Value{Text: strconv.FormatInt(int64((j.Duration.Seconds()+59)/60), 10)}
	case "START_TIME": // UTC, as sbatch --begin reads it with TZ=UTC; "" when not set
		if j.StartTime == nil {
			return profile.Value{}
		}
		return profile.Value{Text: j.StartTime.UTC().Format("2006-01-02T15:04:05")}
	case "START_TIME_PBS": // UTC, qsub -a's [[CC]YY]MMDDhhmm[.SS]
		if j.StartTime == nil {
			return profile.Value{}
		}
		return profile.Value{Text: j.StartTime.UTC().Format("200601021504.05")}
	case "EXECUTABLE":
		return profile.Value{Text: c.exe}
	case "ARGUMENTS":
		return profile.Value{List: append([]string{}, c.args...)}
	}
	return profile.Value{}
}

// operator is a value the operator's config fixes: the submitter's user profile field
// first, then the cluster's. A field some user profile sets makes a script depend on the
// job (its submitter), so it is never rendered once for every job.
func (c *renderCtx) operator(name string) (string, bool) {
	if c.t.userField[name] {
		if c.job == nil {
			c.jobDependent = true
		} else if v, ok := c.t.users.UserFields(c.job.Submitter)[name]; ok {
			return v, true
		}
	}
	v, ok := c.t.cl.Fields[name]
	return v, ok
}

func (c *renderCtx) jobField(name string) (string, bool) {
	if c.job == nil {
		c.jobDependent = true
		return "", false
	}
	v, ok := c.job.Fields[name]
	return v, ok
}

// infoValue is a TargetSystemInfo property by its config name (os_name, cpu_hz, ...)
// or attribute name.
func infoValue(in *cluster.SystemInfo, name string) (string, bool) {
	num := func(n int64) (string, bool) { return strconv.FormatInt(n, 10), n != 0 }
	switch name {
	case "os_name":
		return in.OSName, in.OSName != ""
	case "os_release":
		return in.OSRelease, in.OSRelease != ""
	case "os_version":
		return in.OSVersion, in.OSVersion != ""
	case "platform":
		return in.Platform, in.Platform != ""
	case "cpu_instruction_set":
		return in.CPUInstructionSet, in.CPUInstructionSet != ""
	case "cpu_hz":
		return num(in.CPUHz)
	case "smp_size":
		return num(in.SMPSize)
	case "ram_size":
		return num(in.RAMSize)
	case "virtual_size":
		return num(in.VirtualSize)
	}
	v, ok := in.Attributes[name]
	return v, ok
}

// prepare renders the target's static scripts and the scripts no job value reaches.
func (t *target) prepare() error {
	t.statics = map[string]staticScript{}
	t.fixed = map[string]events.Script{}
	for _, cs := range controlScripts {
		if cs.optional && t.prof.Template(cs.template) == nil {
			continue
		}
		inv := t.prof.Template(cs.template).Invocation(cs.variation)
		if inv.Static == nil {
			continue
		}
		st, err := t.staticScript(inv.Static)
		if err != nil {
			return fmt.Errorf("template %s: %w", cs.template, err)
		}
		t.statics[cs.template+"/"+cs.variation] = st
	}
	if err := t.prepareStorages(); err != nil {
		return err
	}
	for _, cs := range controlScripts {
		if cs.optional && t.prof.Template(cs.template) == nil {
			continue
		}
		c := &renderCtx{t: t}
		body, err := c.control(cs.template, cs.variation)
		if err != nil && !c.jobDependent {
			return fmt.Errorf("template %s: %w", cs.template, err)
		}
		if !c.jobDependent {
			t.fixed[cs.name] = script(string(body))
		}
	}
	return nil
}

// staticScript places a static script in BIN storage: its file name carries its
// content hash, so a changed script is a new file and an installed one never changes.
func (t *target) staticScript(s *profile.StaticScript) (staticScript, error) {
	sum := sha256.Sum256([]byte(s.Content))
	hash := hex.EncodeToString(sum[:])
	bin := t.prof.Template("BIN")
	c := &renderCtx{t: t, extra: map[string]profile.Value{"FILE_NAME": trusted(s.FileName + "-" + hash[:16])}}
	loc, err := bin.ExpandInvocation(bin.Invocation("STATIC_SCRIPT"), c.sources(), nil)
	if err != nil {
		return staticScript{}, fmt.Errorf("BIN STATIC_SCRIPT for %s: %w", s.FileName, err)
	}
	if c.jobDependent {
		return staticScript{}, fmt.Errorf("BIN STATIC_SCRIPT for %s depends on job values; a static script's place must not", s.FileName)
	}
	return staticScript{fileName: s.FileName, script: events.Script{Body: s.Content, SHA256: hash, Location: string(loc)}}, nil
}

// control renders one variation of a control template; a static script variation
// becomes the BIN template's RUN_STATIC_SCRIPT with the script's place and arguments.
func (c *renderCtx) control(tmpl, variation string) ([]byte, error) {
	t := c.t.prof.Template(tmpl)
	inv := t.Invocation(variation)
	if inv.Static == nil {
		return t.ExpandInvocation(inv, c.sources(), nil)
	}
	args, err := t.ExpandText(inv.Static.Arguments, c.sources(), nil)
	if err != nil {
		return nil, err
	}
	st := c.t.statics[tmpl+"/"+variation]
	bin := c.t.prof.Template("BIN")
	run := &renderCtx{t: c.t, job: c.job, queue: c.queue, exe: c.exe, args: c.args, extra: map[string]profile.Value{
		"TARGET":    {Text: st.script.Location},
		"ARGUMENTS": trusted(string(args)),
	}}
	out, err := bin.ExpandInvocation(bin.Invocation("RUN_STATIC_SCRIPT"), run.sources(), nil)
	c.jobDependent = c.jobDependent || run.jobDependent
	return out, err
}

// render incarnates the job on this target.
func (t *target) render(job *events.Job, attempt int, setHash string) (events.IncarnatedData, error) {
	queue := t.chooseQueue(job.Requirements.Queue)
	vars := map[string]string{"taskid": job.ID, "queue": queue, "lrms": t.cl.LRMS}
	c := &renderCtx{t: t, job: job, queue: queue, exe: localExecutable(job, substitute.Substitute(job.Executable, vars), vars)}
	c.args = make([]string, len(job.Arguments))
	for i, a := range job.Arguments {
		c.args[i] = substitute.Substitute(a, vars)
	}
	wd := strings.TrimRight(t.root, t.delim) + t.delim + job.ID
	if attempt > 1 {
		wd += "." + strconv.Itoa(attempt)
	}
	inc := events.IncarnatedData{
		Cluster: t.cl.Name, Queue: queue, LRMS: t.cl.LRMS, Profile: t.prof.Name, ProfileHash: setHash,
		WorkDir: wd, Scripts: make(map[string]events.Script, len(controlScripts)+1),
		NativeIDPattern: t.watch.nativeID, StatusPattern: t.watch.status,
		NativeStates: t.watch.states, AbsentState: t.watch.absent,
		Substituted: substituted(job, vars),
	}
	if err := t.checkFields(job); err != nil {
		return inc, err
	}
	reserved, err := reservedVars(job)
	if err != nil {
		return inc, err
	}
	c.reserved = reserved
	if inc.Storages, err = c.jobStorages(wd); err != nil {
		return inc, err
	}
	body, err := c.jobScript(wd, vars, setHash)
	if err != nil {
		return inc, err
	}
	inc.Scripts[events.ScriptJob] = script(string(body))
	for _, cs := range controlScripts {
		if cs.optional && t.prof.Template(cs.template) == nil {
			continue
		}
		if s, ok := t.fixed[cs.name]; ok {
			inc.Scripts[cs.name] = s
			continue
		}
		out, err := c.control(cs.template, cs.variation)
		if err != nil {
			return inc, fmt.Errorf("rendering %s: %w", cs.name, err)
		}
		inc.Scripts[cs.name] = script(string(out))
	}
	if len(t.statics) > 0 {
		inc.StaticScripts = make(map[string]events.Script, len(t.statics))
		for _, st := range t.statics {
			inc.StaticScripts[st.fileName] = st.script
		}
	}
	return inc, nil
}

// checkFields refuses a job field that no template of the profile defines or uses: a
// typo would otherwise be ignored while the template takes its default.
func (t *target) checkFields(job *events.Job) error {
	for _, name := range slices.Sorted(maps.Keys(job.Fields)) {
		if !slices.ContainsFunc(t.prof.Templates, func(tm *profile.Template) bool { return usesField(tm, name) }) {
			return fmt.Errorf("fields: profile %s has no template with a field %s", t.prof.Name, name)
		}
	}
	return nil
}

func usesField(tm *profile.Template, name string) bool {
	if tm.Field(name) != nil {
		return true
	}
	for _, inv := range tm.Invocations {
		if inv.Body != nil && slices.Contains(inv.Body.Names(), name) ||
			inv.Static != nil && inv.Static.Arguments != nil && slices.Contains(inv.Static.Arguments.Names(), name) {
			return true
		}
	}
	return false
}

// jobScript writes the JOB script: the working directory and job ID as variables, the
// profile's JOB_PROLOGUE, the environment, the program in a subshell with its standard
// streams in the control directory, its exit code in GW_EXIT (and in $? when
// JOB_EPILOGUE starts), then JOB_EPILOGUE.
func (c *renderCtx) jobScript(wd string, vars map[string]string, setHash string) ([]byte, error) {
	job := c.job
	b := make([]byte, 0, 1024)
	b = append(b, "#!/bin/sh\n# gridwire job "...)
	b = append(b, job.ID...)
	b = append(b, " on cluster "+c.t.cl.Name+", profile "+c.t.prof.Name+" ("+setHash+")\n"...)
	b = append(b, events.VarJobID+"="+shellquote.Quote(job.ID)+"\n"...)
	b = append(b, events.VarWorkDir+"="+shellquote.Quote(wd)+"\n"...)
	if job.Parent != "" {
		b = append(b, events.VarParentID+"="+shellquote.Quote(job.Parent)+"\n"...)
	}
	b = c.exportStorages(b)
	b, err := c.template(b, "JOB_PROLOGUE")
	if err != nil {
		return nil, err
	}
	b = loadProperties(b, job)
	b = c.assignReserved(b)
	if job.Directory != "" {
		dir := substitute.Substitute(job.Directory, vars)
		if strings.HasPrefix(dir, "-") {
			dir = "./" + dir
		}
		b = append(b, "cd "+c.word(dir)+" || exit 111\n"...)
	}
	for _, v := range job.Environment {
		b = append(b, "export "+v.Name+"="+c.word(substitute.Substitute(v.Value, vars))+"\n"...)
	}
	if len(job.LibraryPath) > 0 {
		b = append(b, "LD_LIBRARY_PATH="+c.word(strings.Join(job.LibraryPath, ":"))+"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexport LD_LIBRARY_PATH\n"...)
	}
	b = startGate(b, job)
	b = append(b, "(\n"...)
	if b, err = appendLimits(b, job); err != nil {
		return nil, err
	}
	if b, err = c.program(b); err != nil {
		return nil, err
	}
	stdin := "/dev/null"
	if job.Stdin != "" {
		stdin = `"$` + events.VarWorkDir + `"/` + events.StdinFile
	}
	b = runLimited(b, job, "<"+stdin+` >"$`+events.VarWorkDir+`"/`+events.StdoutFile+` 2>"$`+events.VarWorkDir+`"/`+events.StderrFile)
	b = endGate(b, job)
	b = dropProperties(b, job)
	// JOB_EPILOGUE starts with $? as the program's exit code (a GPE epilogue writes it
	// with echo $? > <WORKING_DIRECTORY>/.gpe_exit_status); a function, not a subshell,
	// so no process is forked for it.
	b = append(b, "gw_rc() { return \"$1\"; }\ngw_rc \"$GW_EXIT\"\n"...)
	return c.template(b, "JOB_EPILOGUE")
}

func (c *renderCtx) template(b []byte, name string) ([]byte, error) {
	t := c.t.prof.Template(name)
	b, err := t.ExpandInvocation(t.Invocation(""), c.sources(), b)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", name, err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	return b, nil
}

// program is the job's program line: its application's template, the profile's MPI
// application for an MPI job, or exec of the executable with its arguments.
func (c *renderCtx) program(b []byte) ([]byte, error) {
	job := c.job
	var app profile.Application
	var ok bool
	switch {
	case job.Application != nil:
		app, ok = c.t.prof.Application(job.Application.Name, job.Application.Version)
	case job.MPI || job.JobType == events.JobMPI:
		app, ok = c.t.prof.Application(mpiApplication, "")
	}
	if !ok {
		b = append(b, "exec "...)
		b = append(b, c.word(c.exe)...)
		for _, a := range c.args {
			b = append(b, ' ')
			b = append(b, c.word(a)...)
		}
		return b, nil
	}
	// An application template places EXECUTABLE and ARGUMENTS where its author chose
	// (maybe inside quotes), so a word expanded on the target cannot be handed to it.
	for _, s := range append([]string{c.exe}, c.args...) {
		if c.usesReserved(s) {
			return nil, fmt.Errorf("application %s: the executable and arguments of a job run by an application template cannot hold a reserved substitution (%q)", app.Name, s)
		}
	}
	t := c.t.prof.Template(app.Template)
	variation := ""
	if job.Application != nil {
		variation = job.Application.Variation
	}
	inv := t.Invocation(variation)
	if inv == nil || inv.Body == nil {
		return nil, fmt.Errorf("application %s: template %s has no Body variation %q", app.Name, app.Template, variation)
	}
	b, err := t.ExpandInvocation(inv, c.sources(), b)
	if err != nil {
		return nil, fmt.Errorf("rendering application %s: %w", app.Name, err)
	}
	return b, nil
}

// localExecutable makes a bare executable name the job stages into its working
// directory a path there ("hello.sh" → "./hello.sh"): the v3 description runs such
// programs from the job's files, while exec would search PATH for a bare name. Other bare
// names ("echo", "python3") stay commands found on PATH.
func localExecutable(job *events.Job, exe string, vars map[string]string) string {
	if exe == "" || strings.Contains(exe, "/") {
		return exe
	}
	for _, f := range job.StageIn {
		to := strings.TrimPrefix(substitute.Substitute(f.To, vars), "./")
		if to == exe && !f.Directory {
			return "./" + exe
		}
	}
	return exe
}

// substituted lists the job values {taskid}, {queue} and {lrms} changed, by field, for
// the stager and the auditor.
func substituted(job *events.Job, vars map[string]string) map[string]string {
	var out map[string]string
	add := func(key, v string) {
		if s := substitute.Substitute(v, vars); s != v {
			if out == nil {
				out = map[string]string{}
			}
			out[key] = s
		}
	}
	add("executable", job.Executable)
	add("directory", job.Directory)
	add("default_storage_base", job.DefaultStorageBase)
	add("stdin", job.Stdin)
	for i, a := range job.Arguments {
		add("arguments."+strconv.Itoa(i), a)
	}
	for _, v := range job.Environment {
		add("environment."+v.Name, v.Value)
	}
	for i, s := range job.Stdout {
		add("stdout."+strconv.Itoa(i), s)
	}
	for i, s := range job.Stderr {
		add("stderr."+strconv.Itoa(i), s)
	}
	for i, f := range job.StageIn {
		add("stage_in."+strconv.Itoa(i)+".from", f.From)
		add("stage_in."+strconv.Itoa(i)+".to", f.To)
	}
	for i, f := range job.StageOut {
		add("stage_out."+strconv.Itoa(i)+".from", f.From)
		add("stage_out."+strconv.Itoa(i)+".to", f.To)
	}
	for i, c := range job.Cleanup {
		add("cleanup."+strconv.Itoa(i), c)
	}
	return out
}
