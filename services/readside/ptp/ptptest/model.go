package ptptest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/pkg/ptpwire"
	"github.com/gridwire/gridwire/pkg/rangeset"
)

// group is one range of element IDs with the attributes they share.
type group struct {
	ids   rangeset.Set
	attrs map[string]string
}

// groups reads "count, (range, n, attrs...)..." from args, as PTP's
// AbstractProxyRuntimeSystem.getElementAttributeManager does.
func groups(args []string) ([]group, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no range count")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 0 {
		return nil, fmt.Errorf("range count %q", args[0])
	}
	pos := 1
	out := make([]group, 0, n)
	for i := 0; i < n; i++ {
		if pos+1 >= len(args) {
			return nil, fmt.Errorf("range %d missing", i)
		}
		ids, err := rangeset.Parse(args[pos])
		if err != nil {
			return nil, err
		}
		na, err := strconv.Atoi(args[pos+1])
		if err != nil || na < 0 || pos+2+na > len(args) {
			return nil, fmt.Errorf("attribute count %q of range %d", args[pos+1], i)
		}
		g := group{ids: ids, attrs: map[string]string{}}
		for _, kv := range args[pos+2 : pos+2+na] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("attribute %q is not key=value", kv)
			}
			g.attrs[k] = v
		}
		out = append(out, g)
		pos += 2 + na
	}
	if pos != len(args) {
		return nil, fmt.Errorf("%d arguments after the last range", len(args)-pos)
	}
	return out, nil
}

var validStates = map[string]bool{"STARTING": true, "RUNNING": true, "SUSPENDED": true, "COMPLETED": true}

func checkStates(g group) error {
	for _, k := range []string{"jobState", "processState"} {
		if v, ok := g.attrs[k]; ok && !validStates[v] {
			return fmt.Errorf("%s=%s is not a state PTP's client accepts", k, v)
		}
	}
	return nil
}

// model folds one NEW, CHANGE or REMOVE event.
func (c *Client) model(m ptpwire.Message) error {
	name := ptpwire.EventName(m.ID)
	var parent string
	args := m.Args
	switch m.ID {
	case ptpwire.EvNewMachine, ptpwire.EvNewNode, ptpwire.EvNewQueue, ptpwire.EvNewJob, ptpwire.EvNewProcess, ptpwire.EvProcessChange:
		if len(args) < 1 {
			return fmt.Errorf("ptptest: %s without a parent", name)
		}
		parent, args = args[0], args[1:]
	case ptpwire.EvJobChange, ptpwire.EvMachineChange, ptpwire.EvNodeChange, ptpwire.EvQueueChange, ptpwire.EvRMChange:
	default:
		return fmt.Errorf("ptptest: unexpected %s on the START_EVENTS transaction", name)
	}
	gs, err := groups(args)
	if err != nil {
		return fmt.Errorf("ptptest: %s: %w", name, err)
	}
	for _, g := range gs {
		if err := checkStates(g); err != nil {
			return fmt.Errorf("ptptest: %s: %w", name, err)
		}
		if err := c.fold(m.ID, parent, g); err != nil {
			return fmt.Errorf("ptptest: %s: %w", name, err)
		}
	}
	return nil
}

func (c *Client) fold(id int, parent string, g group) error {
	var err error
	g.ids.Each(func(v uint32) bool {
		key := strconv.FormatUint(uint64(v), 10)
		err = c.foldOne(id, parent, key, g)
		return err == nil
	})
	if id == ptpwire.EvNewProcess || id == ptpwire.EvProcessChange {
		j, ok := c.Jobs[parent]
		if !ok {
			return fmt.Errorf("processes of unknown job %s", parent)
		}
		if id == ptpwire.EvNewProcess {
			j.Procs = g.ids
			j.Proc = map[string]string{}
		} else if !j.Procs.Equal(g.ids) {
			return fmt.Errorf("job %s: change of processes %s, it has %s", parent, g.ids, j.Procs)
		}
		for k, v := range g.attrs {
			j.Proc[k] = v
		}
		return nil
	}
	return err
}

func (c *Client) foldOne(id int, parent, key string, g group) error {
	switch id {
	case ptpwire.EvNewMachine:
		c.Machines[key] = clone(g.attrs)
	case ptpwire.EvNewNode:
		if _, ok := c.Machines[parent]; !ok {
			return fmt.Errorf("node %s of unknown machine %s", key, parent)
		}
		c.Nodes[key] = clone(g.attrs)
	case ptpwire.EvNewQueue:
		c.Queues[key] = clone(g.attrs)
	case ptpwire.EvNewJob:
		if _, ok := c.Queues[parent]; !ok {
			return fmt.Errorf("job %s in unknown queue %s", key, parent)
		}
		if _, ok := c.Jobs[key]; ok {
			return fmt.Errorf("job %s created twice", key)
		}
		j := &Job{ID: key, Queue: parent, Attrs: clone(g.attrs)}
		j.States = append(j.States, g.attrs["jobStatus"])
		c.Jobs[key] = j
		if g.attrs["jobState"] == "COMPLETED" {
			c.Completed++
		}
		if sub, ok := g.attrs["jobSubId"]; ok {
			c.BySubID[sub] = key
		}
	case ptpwire.EvJobChange:
		j, ok := c.Jobs[key]
		if !ok {
			return fmt.Errorf("change of unknown job %s", key)
		}
		was := j.Attrs["jobState"]
		for k, v := range g.attrs {
			j.Attrs[k] = v
		}
		if was != "COMPLETED" && j.Attrs["jobState"] == "COMPLETED" {
			c.Completed++
		}
		j.States = append(j.States, g.attrs["jobStatus"])
	}
	return nil
}
