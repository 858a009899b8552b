package ptpwire

import (
	"fmt"
	"strconv"
)

// Command is what a command asks for, whatever number a form gives it.
type Command int

// Commands of both forms. Numbers 0 to 6 mean the same in both; from 7 on the design
// document and PTP 5 diverge (see CommandOf).
const (
	CmdUnknown Command = iota
	CmdQuit
	CmdInit
	CmdModelDef
	CmdStartEvents
	CmdStopEvents
	CmdSubmitJob
	CmdTerminateJob
	CmdMoveJob         // document 7, "not yet implemented" there
	CmdChangeJob       // document 8, "not yet implemented" there
	CmdListFilters     // document 9, "not yet implemented" there
	CmdSetFilters      // document 10 ("not yet implemented"), PTP 5 10
	CmdFilterEvents    // PTP 5 7
	CmdSuspendEvents   // PTP 5 8
	CmdResumeEvents    // PTP 5 9
	CmdClearFilters    // PTP 5 11
	CmdGetAttributes   // PTP 5 12
	CmdQueryAttributes // PTP 5 13
)

var commandNames = [...]string{"UNKNOWN", "QUIT", "INIT", "MODEL_DEF", "START_EVENTS", "STOP_EVENTS",
	"SUBMIT_JOB", "TERMINATE_JOB", "MOVE_JOB", "CHANGE_JOB", "LIST_FILTERS", "SET_FILTERS",
	"FILTER_EVENTS", "SUSPEND_EVENTS", "RESUME_EVENTS", "CLEAR_FILTERS", "GET_ATTRIBUTES", "QUERY_ATTRIBUTES"}

func (c Command) String() string {
	if c < 0 || int(c) >= len(commandNames) {
		return "Command(" + strconv.Itoa(int(c)) + ")"
	}
	return commandNames[c]
}

var (
	textCommands   = []Command{CmdQuit, CmdInit, CmdModelDef, CmdStartEvents, CmdStopEvents, CmdSubmitJob, CmdTerminateJob, CmdMoveJob, CmdChangeJob, CmdListFilters, CmdSetFilters}
	binaryCommands = []Command{CmdQuit, CmdInit, CmdModelDef, CmdStartEvents, CmdStopEvents, CmdSubmitJob, CmdTerminateJob, CmdFilterEvents, CmdSuspendEvents, CmdResumeEvents, CmdSetFilters, CmdClearFilters, CmdGetAttributes, CmdQueryAttributes}
)

func commandTable(f Format) []Command {
	if f == FormatText {
		return textCommands
	}
	return binaryCommands
}

// CommandOf names the command a form's number stands for; CmdUnknown if none.
func CommandOf(f Format, id int) Command {
	t := commandTable(f)
	if id < 0 || id >= len(t) {
		return CmdUnknown
	}
	return t[id]
}

// CommandID is the number a form gives a command, and whether it has one.
func CommandID(f Format, c Command) (int, bool) {
	for i, x := range commandTable(f) {
		if x == c {
			return i, true
		}
	}
	return 0, false
}

// Event codes (PTP's IProxyEvent, IProxyRuntimeEvent and proxy_event.h), used by both
// forms: the design document names these events but gives no numbers.
const (
	EvOK                = 0
	EvMessage           = 1
	EvError             = 5
	EvShutdown          = 6
	EvSubmitJobError    = 211
	EvTerminateJobError = 212
	EvNewJob            = 220
	EvNewMachine        = 221
	EvNewNode           = 222
	EvNewProcess        = 223
	EvNewQueue          = 224
	EvJobChange         = 230
	EvMachineChange     = 231
	EvNodeChange        = 232
	EvProcessChange     = 233
	EvQueueChange       = 234
	EvRMChange          = 235
	EvRemoveAll         = 240
	EvRemoveJob         = 241
	EvRemoveMachine     = 242
	EvRemoveNode        = 243
	EvRemoveProcess     = 244
	EvRemoveQueue       = 245
	EvAttrDef           = 251
)

var eventNames = map[int]string{EvOK: "OK", EvMessage: "MESSAGE", EvError: "ERROR", EvShutdown: "SHUTDOWN",
	EvSubmitJobError: "SUBMITJOB_ERROR", EvTerminateJobError: "TERMINATEJOB_ERROR", EvNewJob: "NEW_JOB",
	EvNewMachine: "NEW_MACHINE", EvNewNode: "NEW_NODE", EvNewProcess: "NEW_PROCESS", EvNewQueue: "NEW_QUEUE",
	EvJobChange: "CHANGE_JOB", EvMachineChange: "CHANGE_MACHINE", EvNodeChange: "CHANGE_NODE",
	EvProcessChange: "CHANGE_PROCESS", EvQueueChange: "CHANGE_QUEUE", EvRMChange: "CHANGE_RM",
	EvRemoveAll: "REMOVE_ALL", EvRemoveJob: "REMOVE_JOB", EvRemoveMachine: "REMOVE_MACHINE",
	EvRemoveNode: "REMOVE_NODE", EvRemoveProcess: "REMOVE_PROCESS", EvRemoveQueue: "REMOVE_QUEUE", EvAttrDef: "ATTR_DEF"}

// EventName names an event code ("NEW_JOB"), or gives its number.
func EventName(id int) string {
	if n, ok := eventNames[id]; ok {
		return n
	}
	return "EVENT(" + strconv.Itoa(id) + ")"
}

// Attr formats one attribute argument, "key=value".
func Attr(key string, value any) string { return key + "=" + fmt.Sprint(value) }

// Elements is a range set of element IDs that share the attributes that follow them.
type Elements struct {
	IDs   string
	Attrs []string
}

func appendElements(args []string, els []Elements) []string {
	args = append(args, strconv.Itoa(len(els)))
	for _, e := range els {
		args = append(args, e.IDs, strconv.Itoa(len(e.Attrs)))
		args = append(args, e.Attrs...)
	}
	return args
}

// NewElements is a NEW_MACHINE, NEW_QUEUE, NEW_NODE, NEW_JOB or NEW_PROCESS event: the
// parent's ID (resource manager, machine or job; the queue for a job), then the elements.
func NewElements(event int, tid uint32, parent string, els ...Elements) Message {
	return Message{ID: event, TID: tid, Args: appendElements([]string{parent}, els)}
}

// ChangeElements is a CHANGE_JOB, CHANGE_MACHINE, CHANGE_NODE, CHANGE_QUEUE or CHANGE_RM
// event.
func ChangeElements(event int, tid uint32, els ...Elements) Message {
	return Message{ID: event, TID: tid, Args: appendElements(nil, els)}
}

// ChangeProcesses is a CHANGE_PROCESS event for processes of one job.
func ChangeProcesses(tid uint32, job string, els ...Elements) Message {
	return Message{ID: EvProcessChange, TID: tid, Args: appendElements([]string{job}, els)}
}

// Remove is a REMOVE_JOB, REMOVE_MACHINE, REMOVE_NODE or REMOVE_QUEUE event.
func Remove(event int, tid uint32, ids string) Message {
	return Message{ID: event, TID: tid, Args: []string{ids}}
}

// RemoveProcesses is a REMOVE_PROCESS event for processes of one job.
func RemoveProcesses(tid uint32, job, ids string) Message {
	return Message{ID: EvRemoveProcess, TID: tid, Args: []string{job, ids}}
}

// OK answers a command that completed.
func OK(tid uint32) Message { return Message{ID: EvOK, TID: tid} }

// Shutdown answers QUIT.
func Shutdown(tid uint32) Message { return Message{ID: EvShutdown, TID: tid} }

// Error answers a command that failed (proxy_error_event's layout: a count, then the
// errorCode and errorMsg attributes).
func Error(tid uint32, code int, msg string) Message {
	return Message{ID: EvError, TID: tid, Args: []string{"2", Attr("errorCode", code), Attr("errorMsg", ASCII(msg))}}
}

// SubmitJobError answers a SUBMIT_JOB that failed, naming its submission ID.
func SubmitJobError(tid uint32, subID string, code int, msg string) Message {
	return Message{ID: EvSubmitJobError, TID: tid, Args: []string{"3", Attr("jobSubId", subID), Attr("errorCode", code), Attr("errorMsg", ASCII(msg))}}
}

// TerminateJobError answers a TERMINATE_JOB that failed, naming the job.
func TerminateJobError(tid uint32, jobID string, code int, msg string) Message {
	return Message{ID: EvTerminateJobError, TID: tid, Args: []string{"3", Attr("jobId", jobID), Attr("errorCode", code), Attr("errorMsg", ASCII(msg))}}
}

// Note is a MESSAGE event (level FATAL, ERROR, WARNING or INFO).
func Note(tid uint32, level string, code int, text string) Message {
	return Message{ID: EvMessage, TID: tid, Args: []string{"3", Attr("messageLevel", level), Attr("messageCode", code), Attr("messageText", ASCII(text))}}
}

// AttrDef describes one attribute (the DISCOVERY phase's ATTR_DEF).
type AttrDef struct {
	ID, Type, Name, Description string // Type: STRING, INTEGER, BOOLEAN, ...
	Display                     bool
	Default                     string
}

// Event is the ATTR_DEF event for d, one definition an event as PTP's C proxies send
// them: "1", "5", then ID, type, name, description, display flag and default.
func (d AttrDef) Event(tid uint32) Message {
	return Message{ID: EvAttrDef, TID: tid, Args: []string{"1", "5", d.ID, d.Type, ASCII(d.Name), ASCII(d.Description), strconv.FormatBool(d.Display), d.Default}}
}
