package ptp

import (
	"strconv"

	"github.com/gridwire/gridwire/pkg/ptpwire"
	"github.com/gridwire/gridwire/pkg/rangeset"
)

// Attributes gridwire sends. PTP 5 defines the predefined ones itself (its
// *Attributes classes); gridwire defines the rest in MODEL_DEF.
const (
	AttrName           = "name"
	AttrMachineState   = "machineState"
	AttrNumNodes       = "numNodes"
	AttrNodeState      = "nodeState"
	AttrNodeNumber     = "nodeNumber"
	AttrQueueState     = "queueState"
	AttrJobState       = "jobState"
	AttrJobStatus      = "jobStatus"
	AttrJobStatusMsg   = "jobStatusMessage"
	AttrJobSubID       = "jobSubId"
	AttrJobNumProcs    = "jobNumProcs"
	AttrProcState      = "processState"
	AttrProcStatus     = "processStatus"
	AttrProcExitCode   = "processExitCode"
	AttrProcNodeID     = "processNodeId"
	AttrGridwireJobID  = "gridwireJobId"
	AttrJobNativeState = "jobNativeState"
	AttrJobExitCode    = "jobExitCode"
	AttrJobCluster     = "gridwireCluster"
)

type attrDef struct {
	ptpwire.AttrDef
	predefined bool
}

var attrDefs = []attrDef{
	{ptpwire.AttrDef{ID: AttrGridwireJobID, Type: "STRING", Name: "gridwire job", Description: "the job's ID in gridwire's log", Display: true}, false},
	{ptpwire.AttrDef{ID: AttrJobNativeState, Type: "STRING", Name: "native state", Description: "the job's state in its cluster's own batch system", Display: true}, false},
	{ptpwire.AttrDef{ID: AttrJobExitCode, Type: "INTEGER", Name: "exit code", Description: "the program's exit code, once it has exited", Display: true, Default: "0"}, false},
	{ptpwire.AttrDef{ID: AttrJobCluster, Type: "STRING", Name: "cluster", Description: "the gridwire cluster the job runs on", Display: true}, false},
	{ptpwire.AttrDef{ID: AttrName, Type: "STRING", Name: "Name", Description: "element name", Display: true}, true},
	{ptpwire.AttrDef{ID: AttrMachineState, Type: "STRING", Name: "State", Description: "machine state (UP)", Display: true, Default: "UP"}, true},
	{ptpwire.AttrDef{ID: AttrNumNodes, Type: "INTEGER", Name: "nodes", Description: "number of nodes", Display: true, Default: "0"}, true},
	{ptpwire.AttrDef{ID: AttrNodeState, Type: "STRING", Name: "State", Description: "node state (UP)", Display: true, Default: "UP"}, true},
	{ptpwire.AttrDef{ID: AttrNodeNumber, Type: "INTEGER", Name: "Node Number", Description: "position of the node in its machine", Display: true, Default: "0"}, true},
	{ptpwire.AttrDef{ID: AttrQueueState, Type: "STRING", Name: "State", Description: "queue state (NORMAL)", Display: true, Default: "NORMAL"}, true},
	{ptpwire.AttrDef{ID: AttrJobState, Type: "STRING", Name: "State", Description: "STARTING, RUNNING, SUSPENDED or COMPLETED", Display: true, Default: StateStarting}, true},
	{ptpwire.AttrDef{ID: AttrJobStatus, Type: "STRING", Name: "Status", Description: "gridwire's canonical state", Display: true}, true},
	{ptpwire.AttrDef{ID: AttrJobStatusMsg, Type: "STRING", Name: "Status Message", Description: "why the job ended as it did", Display: true}, true},
	{ptpwire.AttrDef{ID: AttrJobSubID, Type: "STRING", Name: "Job Submission ID", Description: "the submission this job answers", Display: false}, true},
	{ptpwire.AttrDef{ID: AttrJobNumProcs, Type: "INTEGER", Name: "Procs", Description: "number of processes", Display: true, Default: "1"}, true},
	{ptpwire.AttrDef{ID: AttrProcState, Type: "STRING", Name: "State", Description: "STARTING, RUNNING, SUSPENDED or COMPLETED", Display: true, Default: StateStarting}, true},
	{ptpwire.AttrDef{ID: AttrProcStatus, Type: "STRING", Name: "Status", Description: "gridwire's canonical state of the job", Display: true}, true},
	{ptpwire.AttrDef{ID: AttrProcExitCode, Type: "INTEGER", Name: "Exit Code", Description: "the program's exit code", Display: true, Default: "0"}, true},
	{ptpwire.AttrDef{ID: AttrProcNodeID, Type: "STRING", Name: "Process Node ID", Description: "the node element the process runs on", Display: true}, true},
}

// maxElements is how many elements one NEW or CHANGE event carries.
const maxElements = 256

func (s *session) id(off uint32) string { return strconv.FormatUint(uint64(s.base)+uint64(off), 10) }

func (s *session) rmID() string { return strconv.FormatUint(uint64(s.base), 10) }

// sendModel sends the machines, nodes and queues, then every job the model holds, and
// sets the cursor just after them.
func (s *session) sendModel() error {
	tid, st := s.startTID, s.svc.static
	var machs []ptpwire.Elements
	for _, m := range st.list {
		machs = append(machs, ptpwire.Elements{IDs: s.id(m.Offset), Attrs: []string{
			ptpwire.Attr(AttrName, ptpwire.ASCII(m.Name)), ptpwire.Attr(AttrMachineState, "UP"), ptpwire.Attr(AttrNumNodes, len(m.Nodes))}})
	}
	if len(machs) > 0 {
		if err := s.send(ptpwire.NewElements(ptpwire.EvNewMachine, tid, s.rmID(), machs...)); err != nil {
			return err
		}
	}
	for _, m := range st.list {
		var nodes []ptpwire.Elements
		for i, n := range m.Nodes {
			nodes = append(nodes, ptpwire.Elements{IDs: s.id(n.Offset), Attrs: []string{
				ptpwire.Attr(AttrName, ptpwire.ASCII(n.Host)), ptpwire.Attr(AttrNodeState, "UP"), ptpwire.Attr(AttrNodeNumber, i)}})
		}
		if err := s.send(ptpwire.NewElements(ptpwire.EvNewNode, tid, s.id(m.Offset), nodes...)); err != nil {
			return err
		}
	}
	var queues []ptpwire.Elements
	for _, q := range st.queues {
		queues = append(queues, ptpwire.Elements{IDs: s.id(q.Offset), Attrs: []string{
			ptpwire.Attr(AttrName, ptpwire.ASCII(q.Label())), ptpwire.Attr(AttrQueueState, "NORMAL")}})
	}
	if err := s.send(ptpwire.NewElements(ptpwire.EvNewQueue, tid, s.rmID(), queues...)); err != nil {
		return err
	}
	views, cursor := s.svc.model.snapshot()
	s.cursor = cursor
	return s.announce(views)
}

// announce sends NEW_JOB events for jobs this session has not seen, grouped by queue,
// then each job's NEW_PROCESS.
func (s *session) announce(views []jobView) error {
	byQueue := map[uint32][]ptpwire.Elements{}
	var order []uint32
	var fresh []jobView
	for i := range views {
		v := &views[i]
		if s.announced[v.JobID] {
			continue
		}
		q := s.svc.static.queueOf(v).Offset
		if _, ok := byQueue[q]; !ok {
			order = append(order, q)
		}
		byQueue[q] = append(byQueue[q], ptpwire.Elements{IDs: s.id(v.Offset), Attrs: s.jobAttrs(v, true)})
		s.announced[v.JobID] = true
		fresh = append(fresh, *v)
	}
	for _, q := range order {
		els := byQueue[q]
		for len(els) > 0 {
			n := min(len(els), maxElements)
			if err := s.send(ptpwire.NewElements(ptpwire.EvNewJob, s.startTID, s.id(q), els[:n]...)); err != nil {
				return err
			}
			els = els[n:]
		}
	}
	for i := range fresh {
		v := &fresh[i]
		if err := s.send(ptpwire.NewElements(ptpwire.EvNewProcess, s.startTID, s.id(v.Offset),
			ptpwire.Elements{IDs: s.procIDs(v), Attrs: s.procAttrs(v, true)})); err != nil {
			return err
		}
	}
	return nil
}

func (s *session) procIDs(v *jobView) string {
	var set rangeset.Set
	first := s.base + v.Offset + 1
	set.AddRange(first, first+uint32(v.Procs)-1)
	return set.String()
}

// jobAttrs are a job's attributes; isNew adds those that never change.
func (s *session) jobAttrs(v *jobView, isNew bool) []string {
	a := []string{ptpwire.Attr(AttrJobState, jobState(v.Status)), ptpwire.Attr(AttrJobStatus, string(v.Status))}
	if isNew {
		a = append(a, ptpwire.Attr(AttrName, ptpwire.ASCII(v.Name)), ptpwire.Attr(AttrGridwireJobID, v.JobID),
			ptpwire.Attr(AttrJobNumProcs, v.Procs))
		if v.Cluster != "" {
			a = append(a, ptpwire.Attr(AttrJobCluster, v.Cluster))
		}
		if sub, ok := s.subIDs[v.JobID]; ok {
			a = append(a, ptpwire.Attr(AttrJobSubID, sub))
			delete(s.subIDs, v.JobID)
		}
	}
	if v.Native != "" {
		a = append(a, ptpwire.Attr(AttrJobNativeState, ptpwire.ASCII(v.Native)))
	}
	if v.Reason != "" {
		a = append(a, ptpwire.Attr(AttrJobStatusMsg, ptpwire.ASCII(v.Reason)))
	}
	if v.ExitCode != nil {
		a = append(a, ptpwire.Attr(AttrJobExitCode, *v.ExitCode))
	}
	return a
}

func (s *session) procAttrs(v *jobView, isNew bool) []string {
	a := []string{ptpwire.Attr(AttrProcState, procState(v)), ptpwire.Attr(AttrProcStatus, string(v.Status))}
	if isNew {
		a = append(a, ptpwire.Attr(AttrName, ptpwire.ASCII(v.Name)))
	}
	if n, ok := s.svc.static.nodeOf(v); ok {
		a = append(a, ptpwire.Attr(AttrProcNodeID, s.id(n)))
	}
	if v.ExitCode != nil {
		a = append(a, ptpwire.Attr(AttrProcExitCode, *v.ExitCode))
	}
	return a
}

// pump sends the changes after the cursor. It returns the channel that says more have
// come, and whether more were already waiting.
func (s *session) pump() (<-chan struct{}, bool, error) {
	changes, next, wake, err := s.svc.model.since(s.cursor, batch)
	if err != nil {
		_ = s.send(ptpwire.Note(s.startTID, "FATAL", CodeProtocol, err.Error()+"; reconnect to receive the model again"))
		_ = s.flush()
		return nil, false, err
	}
	s.cursor = next
	for i := range changes {
		if err := s.sendChange(&changes[i].View); err != nil {
			return nil, false, err
		}
	}
	return wake, len(changes) == batch, nil
}

func (s *session) sendChange(v *jobView) error {
	if !s.announced[v.JobID] {
		return s.announce([]jobView{*v})
	}
	tid, id := s.startTID, s.id(v.Offset)
	if err := s.send(ptpwire.ChangeElements(ptpwire.EvJobChange, tid, ptpwire.Elements{IDs: id, Attrs: s.jobAttrs(v, false)})); err != nil {
		return err
	}
	return s.send(ptpwire.ChangeProcesses(tid, id, ptpwire.Elements{IDs: s.procIDs(v), Attrs: s.procAttrs(v, false)}))
}
