package fsm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/api"
)

// taskLocked returns the task k names, or nil if it was never placed.
func (f *FSM) taskLocked(k taskKey) *task {
	j := f.mu.jobs.get(k.job)
	if j == nil || int(k.group) >= len(j.groups) {
		return nil
	}
	g := j.groups[k.group]
	if int64(k.index) >= int64(len(g.tasks)) {
		return nil
	}
	return g.tasks[k.index]
}

// eachTaskLocked calls fn for every task placed at least once, in key
// order.
func (f *FSM) eachTaskLocked(fn func(*task)) {
	for j := range f.mu.jobs.all() {
		for _, g := range j.groups {
			for _, t := range g.tasks {
				fn(t)
			}
		}
	}
}

// report is a decoded report of an UpdateTasks command.
type report struct {
	node, id string
	state    api.TaskState
	reason   api.TaskReason
	exit     int32
	key      taskKey
	attempt  uint32
	action   uint8
	t        *task    // the task the report is about, found by pass 1
	ct       *captask // or the capbox task
}

const (
	actApply uint8 = iota
	actNoOp
	actStale
)

func (f *FSM) updateLocked(w writer, now int64, version byte, cmd *dec) ([]byte, error) {
	// The reports' node names and task IDs alias the command, which
	// outlives no apply: nothing keeps them but an error, which clones.
	// Reasons, which tasks keep, are the api's constants or copies.
	sd := viewDec(cmd.b)
	d := &sd
	// The reports refer to the command: none is kept past it, so every
	// report the memory held is zero again.
	rs := readReports(d, version, f.reports[:0])
	defer func() { clear(rs); f.reports = rs[:0] }()
	var slotTTL int64
	if len(d.b) > 0 {
		slotTTL = d.varint()
	}
	if err := d.done("update command"); err != nil {
		return nil, err
	}
	if slotTTL < 0 {
		return nil, fmt.Errorf("%w: slot TTL %d", ErrCorrupt, slotTTL)
	}
	f.slotTTL = slotTTL
	defer func() { f.slotTTL = 0 }()
	// Pass 1: check every report against the state the reports before it
	// leave (kept on the task, task.overlay), writing nothing.
	defer func() {
		for i := range rs {
			if t := rs[i].t; t != nil {
				t.overlaid, t.overlay = false, 0
			}
		}
	}()
	var ctOverlay map[*captask]api.TaskState
	for i := range rs {
		r := &rs[i]
		bad := func(err error) error { return &ReportError{Index: i, TaskID: strings.Clone(r.id), Err: err} }
		if _, _, ok := splitCapTaskID(r.id); ok {
			if ctOverlay == nil {
				ctOverlay = map[*captask]api.TaskState{}
			}
			var err error
			if r.ct, err = f.capTaskReport(r, ctOverlay); err != nil {
				return nil, bad(err)
			}
			continue
		}
		var ok bool
		if r.key, r.attempt, ok = parseTaskID(r.id); !ok {
			return nil, bad(fmt.Errorf("%w: malformed task ID", ErrBadReport))
		}
		t := f.taskLocked(r.key)
		if t == nil || t.attempt == 0 { // attempt 0: a capbox released before it was placed
			return nil, bad(fmt.Errorf("%w: no such task", ErrBadReport))
		}
		r.t = t
		cur := t.state
		if t.overlaid {
			cur = t.overlay
		}
		if err := r.classify(cur, r.attempt != t.attempt || r.node != t.node || t.closed); err != nil {
			return nil, bad(err)
		}
		if r.action == actApply {
			t.overlay, t.overlaid = r.state, true
		}
	}
	// Pass 2: apply; nothing can fail now.
	var res UpdateResult
	for i := range rs {
		r := &rs[i]
		switch r.action {
		case actNoOp:
			res.NoOp++
			continue
		case actStale:
			res.Stale++
			continue
		}
		res.Applied++
		if r.ct != nil {
			f.applyCapTaskReport(w, r.ct, r, now)
			continue
		}
		t := r.t
		if r.state.Done() {
			if f.finishLocked(w, t, r.state, r.reason, r.exit, now, false) {
				res.Requeued++
			}
			continue
		}
		t.state, t.reason, t.updated = r.state, r.reason, now
		f.writeTask(t)
		if j := f.mu.jobs.get(t.key.job); j.owner() != nil {
			// A capbox's appmaster watches for it to run: the change
			// goes in the set's change log.
			f.touchGroup(j.groups[t.key.group])
		}
	}
	return res.encode(), nil
}

// readReports reads an update command's reports, written by command
// version version, into rs's memory.
func readReports(d *dec, version byte, rs []report) []report {
	n := d.count(6)
	rs = slices.Grow(rs[:0], n)[:n]
	node := ""
	for i := range rs {
		r := &rs[i]
		if version == 5 { // UpdateTasksCaching's doc says what 6 changed
			r.node, r.id = d.str(), d.str()
			r.state, r.reason, r.exit = api.TaskState(d.byte()), internReason(d.bytes()), int32(d.varint())
			d.varint() // the nodelet's time
		} else {
			node = d.repeatStr(node)
			r.node, r.id = node, d.str()
			r.state, r.reason, r.exit = api.TaskState(d.byte()), readReason(d), int32(d.varint())
		}
		d.bytes() // message: not kept yet
	}
	return rs
}

// knownReasons are the reasons nodes report, for internReason and
// reasonCode. An update command carries a reason as its index here, so the
// order is part of the command format: append only.
// Code 9, api.ReasonImageDenied, is newer than version 6 itself: a log
// written before it spells that reason out after a 0, which internReason
// reads as this constant. Codes 10 to 12 came with version 7.
var knownReasons = [...]api.TaskReason{api.ReasonStarted, api.ReasonExited, api.ReasonOOMKilled, api.ReasonMemoryKiller,
	api.ReasonStartFailed, api.ReasonStopped, api.ReasonTimeLimit, api.ReasonLost, api.ReasonImageDenied,
	api.ReasonNetworkDenied, api.ReasonVolumeDenied, api.ReasonScratchFull}

// reasonCode is r's code in an update command: its index in knownReasons
// plus one, or 0 for a reason spelled out after it.
func reasonCode(r api.TaskReason) byte {
	for i, k := range knownReasons {
		if r == k {
			return byte(i + 1)
		}
	}
	return 0
}

// readReason reads a reason reasonCode wrote, and the spelling after a 0.
func readReason(d *dec) api.TaskReason {
	c := d.byte()
	switch {
	case c == 0:
		return internReason(d.bytes())
	case int(c) <= len(knownReasons):
		return knownReasons[c-1]
	}
	d.fail("reason code")
	return ""
}

// internReason returns the reason b spells: one of the api's constants,
// or a copy of b for another, so that a task keeping it keeps nothing else
// alive.
func internReason(b []byte) api.TaskReason {
	for _, r := range knownReasons {
		if string(b) == string(r) {
			return r
		}
	}
	return api.TaskReason(b)
}

// classify sets what to do with a report about a task in state cur
// (after the reports before it), stale when it is about an attempt or
// node the task has left; it returns the error that rejects the command
// for a state no node reports or a transition api forbids.
func (r *report) classify(cur api.TaskState, stale bool) error {
	if !r.state.Valid() || r.state == api.TaskPending || r.state == api.TaskAssigned {
		return fmt.Errorf("%w: nodes do not report state %v", ErrBadReport, r.state)
	}
	switch {
	case stale:
		r.action = actStale
	case r.state == cur:
		r.action = actNoOp
	case progress(r.state) < progress(cur):
		// Reports are at least once: a node whose acknowledgement was
		// lost sends an earlier state again after a later one was
		// committed. It says nothing new.
		r.action = actStale
	default:
		if err := api.CheckTaskTransition(cur, r.state); err != nil {
			return err
		}
		r.action = actApply
	}
	return nil
}

// progress orders the states a node reports along a task's life: assigned,
// starting, running, then any end.
func progress(s api.TaskState) int {
	switch s {
	case api.TaskAssigned:
		return 1
	case api.TaskStarting:
		return 2
	case api.TaskRunning:
		return 3
	case api.TaskPending:
		return 0
	default:
		return 4
	}
}
