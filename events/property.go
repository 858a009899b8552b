package events

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// DDS property access and scope, as a topology declares them.
const (
	AccessRead      = "read"
	AccessWrite     = "write"
	AccessReadWrite = "readwrite" // the default of a listing without access
	ScopeGlobal     = "global"    // the default of a property without scope
	ScopeCollection = "collection"
)

// MaxPropertyValue is the longest property value, in characters: the limit DDS's
// topology manual gives ("256 char max"). DDS's code enforces none; gridwire holds the
// manual's, so that a session's history stays small however chatty its tasks are.
const MaxPropertyValue = 256

// maxPropertyKey is the longest property name DDS's schema allows (stringNameType).
const maxPropertyKey = 128

// PropertySetData is a property_set event's payload: one task of a DDS session set a
// property. It is appended to the session's history (the topology's parent record), so
// the session's log holds every value its tasks exchanged, in order.
type PropertySetData struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// Task is the writer's job ID, TaskPath its DDS task path and DDSTaskID the ID DDS
	// gives it (DDS_TASK_ID), which DDS hands readers as the sender.
	Task      string `json:"task"`
	TaskPath  string `json:"task_path,omitempty"`
	DDSTaskID string `json:"dds_task_id,omitempty"`
	// Scope is the property's declared scope; for ScopeCollection, Collection is the
	// writer's collection instance (its runtime path), the only one the value reaches.
	Scope      string `json:"scope"`
	Collection string `json:"collection,omitempty"`
}

// ErrPropertyRefused is the identity of every refused property read or write.
var ErrPropertyRefused = errors.New("events: property refused")

// PropertyError says why a task may not read or write a property. Code is stable:
// one of the Refused* constants.
type PropertyError struct {
	Key  string
	Code string
	Why  string
}

// Codes of PropertyError: the first five are the task's declaration refusing, the last
// two a key or value no property may have.
const (
	RefusedNotATask     = "not_a_session_task"
	RefusedUndeclared   = "not_declared"
	RefusedReadOnly     = "read_only"
	RefusedWriteOnly    = "write_only"
	RefusedNoCollection = "not_in_collection"
	RefusedBadName      = "bad_name"
	RefusedValue        = "bad_value"
)

func (e *PropertyError) Error() string {
	return fmt.Sprintf("property %q: %s", e.Key, e.Why)
}

// Unwrap makes errors.Is(err, ErrPropertyRefused) hold.
func (e *PropertyError) Unwrap() error { return ErrPropertyRefused }

// Property returns a task's declaration of property key: its access and scope with
// DDS's defaults filled in.
func (j *Job) Property(key string) (DDSProperty, bool) {
	if j == nil || j.DDS == nil {
		return DDSProperty{}, false
	}
	for _, p := range j.DDS.Properties {
		if p.Name == key {
			if p.Access == "" {
				p.Access = AccessReadWrite
			}
			if p.Scope == "" {
				p.Scope = ScopeGlobal
			}
			return p, true
		}
	}
	return DDSProperty{}, false
}

// HasProperties reports whether j is a task of a DDS session that declares properties:
// the tasks that get a property credential.
func (j *Job) HasProperties() bool {
	return j != nil && j.Parent != "" && j.DDS != nil && len(j.DDS.Properties) > 0
}

// PropertyWrite is the fact a task's write of key = value makes, or why the task may
// not make it, by DDS's rules (its agent's checks on a key update): the task declares the
// key, with write or readwrite access; a collection-scoped property is written only from
// inside a collection; and the value fits MaxPropertyValue.
func PropertyWrite(task *Job, key, value string) (PropertySetData, error) {
	if err := checkKey(key); err != nil {
		return PropertySetData{}, err
	}
	p, err := declared(task, key)
	if err != nil {
		return PropertySetData{}, err
	}
	if p.Access == AccessRead {
		return PropertySetData{}, &PropertyError{key, RefusedReadOnly, "task " + task.DDS.TaskPath + " declares it with read access: it may not write it"}
	}
	d := PropertySetData{Key: key, Value: value, Task: task.ID, TaskPath: task.DDS.TaskPath, DDSTaskID: task.DDS.TaskID, Scope: p.Scope}
	if p.Scope == ScopeCollection {
		if task.DDS.CollectionPath == "" {
			return PropertySetData{}, &PropertyError{key, RefusedNoCollection, "its scope is collection, but task " + task.DDS.TaskPath + " is in no collection"}
		}
		d.Collection = task.DDS.CollectionPath
	}
	return d, d.checkValue()
}

// PropertyRead returns a task's declaration of key if the task may read it (read or
// readwrite access), else why not.
func PropertyRead(task *Job, key string) (DDSProperty, error) {
	if err := checkKey(key); err != nil {
		return DDSProperty{}, err
	}
	p, err := declared(task, key)
	if err != nil {
		return p, err
	}
	if p.Access == AccessWrite {
		return p, &PropertyError{key, RefusedWriteOnly, "task " + task.DDS.TaskPath + " declares it with write access: it may not read it"}
	}
	return p, nil
}

func declared(task *Job, key string) (DDSProperty, error) {
	if task == nil || task.DDS == nil || task.Parent == "" {
		return DDSProperty{}, &PropertyError{key, RefusedNotATask, "only a task of a DDS session has properties"}
	}
	p, ok := task.Property(key)
	if !ok {
		return p, &PropertyError{key, RefusedUndeclared, "task " + task.DDS.TaskPath + " does not declare it"}
	}
	return p, nil
}

// Reaches reports whether the value reaches task: the task may read the key and, for a
// collection-scoped property, runs in the same collection instance as the writer. As in
// DDS, the writer itself is not notified of its own write; Reaches does not decide that.
func (d PropertySetData) Reaches(task *Job) bool {
	p, err := PropertyRead(task, d.Key)
	if err != nil || p.Scope != d.Scope {
		return false
	}
	return d.Scope == ScopeGlobal || task.DDS.CollectionPath == d.Collection
}

// Check reports what is wrong with a property_set payload on its own.
func (d PropertySetData) Check() error {
	if err := checkKey(d.Key); err != nil {
		return err
	}
	switch {
	case !validJobID(d.Task):
		return &PropertyError{d.Key, RefusedNotATask, fmt.Sprintf("writer %q is not a job ID", d.Task)}
	case d.Scope != ScopeGlobal && d.Scope != ScopeCollection:
		return &PropertyError{d.Key, RefusedNoCollection, fmt.Sprintf("scope %q is neither global nor collection", d.Scope)}
	case (d.Scope == ScopeCollection) != (d.Collection != ""):
		return &PropertyError{d.Key, RefusedNoCollection, "a collection instance is named exactly when the scope is collection"}
	}
	return d.checkValue()
}

func (d PropertySetData) checkValue() error {
	if !utf8.ValidString(d.Value) {
		return &PropertyError{d.Key, RefusedValue, "the value is not UTF-8 text"}
	}
	if n := utf8.RuneCountInString(d.Value); n > MaxPropertyValue {
		return &PropertyError{d.Key, RefusedValue, fmt.Sprintf("the value has %d characters; the limit is %d", n, MaxPropertyValue)}
	}
	return nil
}

// checkKey holds a key to DDS's name type: 1 to 128 of a-z A-Z 0-9 # @ ~ _ -.
func checkKey(key string) error {
	if key == "" || len(key) > maxPropertyKey {
		return &PropertyError{key, RefusedBadName, fmt.Sprintf("a property name has 1 to %d characters", maxPropertyKey)}
	}
	for _, c := range key {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '#' || c == '@' || c == '~' || c == '_' || c == '-'
		if !ok {
			return &PropertyError{key, RefusedBadName, fmt.Sprintf("%q is not allowed in a property name (a-z A-Z 0-9 # @ ~ _ -)", c)}
		}
	}
	return nil
}

// applyPropertySet folds a property_set into its session: the payload must stand on its
// own (whether its writer may write it is the writer's declaration, checked by
// PropertyWrite before the append and by CheckInvariants over a whole log). A session
// that has ended takes no more properties (Apply refuses every event after the end).
func applyPropertySet(s *State, e *Event) error {
	var d PropertySetData
	if err := e.Payload(&d); err != nil {
		return err
	}
	if err := d.Check(); err != nil {
		return illegal(s, e, err.Error())
	}
	return nil
}
