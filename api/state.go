package api

import (
	"errors"
	"fmt"
	"slices"
)

// ErrBadTransition is wrapped by every error that rejects a state change.
var ErrBadTransition = errors.New("api: state transition not allowed")

// TransitionError says which state change was refused.
type TransitionError struct {
	Kind     string // "task" or "capbox"
	From, To string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("%s state %s -> %s not allowed", e.Kind, e.From, e.To)
}

// Unwrap makes errors.Is(err, ErrBadTransition) true.
func (e *TransitionError) Unwrap() error { return ErrBadTransition }

// machine is a state machine as data: the names of its states and, for each,
// the states it may move to.
type machine[S ~uint8] struct {
	kind  string
	names []string
	next  [][]S
}

func (m *machine[S]) valid(s S) bool { return int(s) < len(m.names) }

func (m *machine[S]) name(s S) string {
	if m.valid(s) {
		return m.names[s]
	}
	return fmt.Sprintf("%s(%d)", m.kind, uint8(s))
}

func (m *machine[S]) parse(s string) (S, error) {
	if i := slices.Index(m.names, s); i >= 0 {
		return S(i), nil
	}
	return 0, fmt.Errorf("unknown %s state %q (want one of %v)", m.kind, s, m.names)
}

func (m *machine[S]) marshal(s S) ([]byte, error) {
	if !m.valid(s) {
		return nil, fmt.Errorf("invalid %s state %d", m.kind, uint8(s))
	}
	return []byte(m.names[s]), nil
}

func (m *machine[S]) successors(s S) []S {
	if !m.valid(s) {
		return nil
	}
	return slices.Clone(m.next[s])
}

func (m *machine[S]) check(from, to S) error {
	if m.valid(from) && m.valid(to) && slices.Contains(m.next[from], to) {
		return nil
	}
	return &TransitionError{Kind: m.kind, From: m.name(from), To: m.name(to)}
}

func (m *machine[S]) all() []S {
	s := make([]S, len(m.names))
	for i := range s {
		s[i] = S(i)
	}
	return s
}

// TaskState is where a task is in its life:
//
//	pending → assigned → starting → running → {succeeded, failed, killed, lost}
//
// with failed, killed and lost going back to pending when the task is
// retried. CheckTaskTransition enforces the allowed changes.
type TaskState uint8

// Task states.
const (
	TaskPending   TaskState = iota // waiting for a scheduling round
	TaskAssigned                   // placed on a node by a committed plan
	TaskStarting                   // the node is starting its pod
	TaskRunning                    // its pod is running
	TaskSucceeded                  // exited with code 0
	TaskFailed                     // exited non-zero, or could not start
	TaskKilled                     // stopped: cancelled, preempted, over its run time or memory
	TaskLost                       // its node went down or lost track of it
)

var taskMachine = machine[TaskState]{
	kind:  "task",
	names: []string{"pending", "assigned", "starting", "running", "succeeded", "failed", "killed", "lost"},
	next: [][]TaskState{
		TaskPending:   {TaskAssigned, TaskKilled},
		TaskAssigned:  {TaskStarting, TaskRunning, TaskFailed, TaskKilled, TaskLost},
		TaskStarting:  {TaskRunning, TaskSucceeded, TaskFailed, TaskKilled, TaskLost},
		TaskRunning:   {TaskSucceeded, TaskFailed, TaskKilled, TaskLost},
		TaskSucceeded: nil,
		TaskFailed:    {TaskPending},
		TaskKilled:    {TaskPending},
		TaskLost:      {TaskPending},
	},
}

// TaskStates lists every task state in order.
func TaskStates() []TaskState { return taskMachine.all() }

func (s TaskState) String() string { return taskMachine.name(s) }

// Valid reports whether s is one of the task states.
func (s TaskState) Valid() bool { return taskMachine.valid(s) }

// Done reports whether a task in state s has stopped running: succeeded,
// failed, killed or lost. Only succeeded is final; the others may be retried.
func (s TaskState) Done() bool { return s >= TaskSucceeded && s.Valid() }

// Next returns the states a task may move to from s.
func (s TaskState) Next() []TaskState { return taskMachine.successors(s) }

// ParseTaskState returns the task state named s.
func ParseTaskState(s string) (TaskState, error) { return taskMachine.parse(s) }

// MarshalText writes the state's name.
func (s TaskState) MarshalText() ([]byte, error) { return taskMachine.marshal(s) }

// UnmarshalText reads a state's name.
func (s *TaskState) UnmarshalText(b []byte) (err error) {
	*s, err = taskMachine.parse(string(b))
	return err
}

// CheckTaskTransition returns nil if a task may move from one state to the
// other, and a *TransitionError wrapping ErrBadTransition if not.
func CheckTaskTransition(from, to TaskState) error { return taskMachine.check(from, to) }

// CapboxState is where a capbox (a resource slot an appmaster leases) is in
// its life:
//
//	pending → assigned → starting → running → {released, failed, lost}
//
// The appmaster decides how long a capbox lives and may release it in any
// state before the end; released, failed and lost are final (a new capbox is
// requested instead of retrying one).
type CapboxState uint8

// Capbox states.
const (
	CapboxPending  CapboxState = iota // requested, waiting for a scheduling round
	CapboxAssigned                    // placed on a node by a committed plan
	CapboxStarting                    // the node is starting its placeholder
	CapboxRunning                     // ready for the appmaster's tasks
	CapboxReleased                    // released by its appmaster
	CapboxFailed                      // could not start, or its placeholder died
	CapboxLost                        // its node went down
)

var capboxMachine = machine[CapboxState]{
	kind:  "capbox",
	names: []string{"pending", "assigned", "starting", "running", "released", "failed", "lost"},
	next: [][]CapboxState{
		CapboxPending:  {CapboxAssigned, CapboxReleased},
		CapboxAssigned: {CapboxStarting, CapboxRunning, CapboxReleased, CapboxFailed, CapboxLost},
		CapboxStarting: {CapboxRunning, CapboxReleased, CapboxFailed, CapboxLost},
		CapboxRunning:  {CapboxReleased, CapboxFailed, CapboxLost},
		CapboxReleased: nil,
		CapboxFailed:   nil,
		CapboxLost:     nil,
	},
}

// CapboxStates lists every capbox state in order.
func CapboxStates() []CapboxState { return capboxMachine.all() }

func (s CapboxState) String() string { return capboxMachine.name(s) }

// Valid reports whether s is one of the capbox states.
func (s CapboxState) Valid() bool { return capboxMachine.valid(s) }

// Done reports whether s is final: released, failed or lost.
func (s CapboxState) Done() bool { return s >= CapboxReleased && s.Valid() }

// Next returns the states a capbox may move to from s.
func (s CapboxState) Next() []CapboxState { return capboxMachine.successors(s) }

// ParseCapboxState returns the capbox state named s.
func ParseCapboxState(s string) (CapboxState, error) { return capboxMachine.parse(s) }

// MarshalText writes the state's name.
func (s CapboxState) MarshalText() ([]byte, error) { return capboxMachine.marshal(s) }

// UnmarshalText reads a state's name.
func (s *CapboxState) UnmarshalText(b []byte) (err error) {
	*s, err = capboxMachine.parse(string(b))
	return err
}

// CheckCapboxTransition returns nil if a capbox may move from one state to
// the other, and a *TransitionError wrapping ErrBadTransition if not.
func CheckCapboxTransition(from, to CapboxState) error { return capboxMachine.check(from, to) }
