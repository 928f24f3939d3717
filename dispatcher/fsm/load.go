package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/raftkv"
)

// Load replaces the FSM's state with the one stored in r and rebuilds the
// in-memory indexes: what tasks hold on each node, active counts per group,
// pending groups per queue. raftkv calls it at Open and after a snapshot
// restore.
// Subscribers are then told (ChangeReset), whether it succeeded or not.
func (f *FSM) Load(r raftkv.Reader) error {
	err := f.loadLocking(r)
	f.publishControl(ChangeReset, f.Applied())
	return err
}

func (f *FSM) loadLocking(r raftkv.Reader) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resetLocked()
	// What loading marked belongs to no command.
	defer f.resetDirty()
	if err := f.loadLocked(r); err != nil {
		f.resetLocked()
		return fmt.Errorf("fsm: load: %w", err)
	}
	return nil
}

func getUint64(r raftkv.Reader, key []byte) (uint64, bool, error) {
	v, err := r.Get(key)
	if errors.Is(err, raftkv.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("%w: %s holds %d bytes", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// checkJobNumLocked rejects the record of a job (or capbox set) numbered
// outside 1 to the job sequence: the table of jobs is indexed by number.
func (f *FSM) checkJobNumLocked(what string, num uint64) error {
	if num == 0 || num >= f.mu.nextJob {
		return fmt.Errorf("%w: %s record numbered %d, outside 1..%d", ErrCorrupt, what, num, f.mu.nextJob-1)
	}
	return nil
}

// loadLocked reads the state stored in r into the FSM, reset: the
// counters, then each kind of record, in the order of what they name
// (jobs before their capbox sets, groups and tasks; nodes before their
// generations, tasks and slots), then what derives from them all.
func (f *FSM) loadLocked(r raftkv.Reader) error {
	if err := f.loadCountersLocked(r); err != nil {
		return err
	}
	sd := newSpecDecoder(maxSlabChunk)
	steps := []struct {
		prefix string
		load   func(k, v []byte) error
	}{
		{prefixSubmit, func(k, v []byte) error { return f.loadSubmitRecordLocked(sd, k, v) }},
		// A job's own record (written when it changes after its submit)
		// supersedes its submit record's.
		{prefixJob, func(k, v []byte) error { return f.loadJobRecordLocked(sd, k, v) }},
		{prefixForgotten, f.loadForgottenLocked},
		{prefixCapboxSet, f.loadCapboxSetRecordLocked},
		{prefixGroup, f.loadGroupRecordLocked},
		{prefixNode, f.loadNodeRecordLocked},
		{prefixGen, f.loadGenRecordLocked},
		{prefixTask, f.loadTaskRecordLocked},
		{prefixCapTask, f.loadCapTaskLocked},
		{prefixSlot, f.loadSlotRecordLocked},
		{prefixIdem, f.loadIdemRecordLocked},
		{prefixHistory, f.loadSummaryLocked},
		{prefixQueue, f.loadQueueLocked},
	}
	for _, s := range steps {
		if err := r.Scan([]byte(s.prefix), prefixEnd(s.prefix), s.load); err != nil {
			return err
		}
	}
	f.settleLoadLocked()
	return nil
}

// loadCountersLocked reads the job and slot sequences, the plan term and
// the applied index.
func (f *FSM) loadCountersLocked(r raftkv.Reader) error {
	var err error
	var ok bool
	if f.mu.nextJob, ok, err = getUint64(r, keyJobSeq); err != nil {
		return err
	} else if !ok {
		f.mu.nextJob = 1
	}
	if f.mu.planTerm, _, err = getUint64(r, keyPlanTerm); err != nil {
		return err
	}
	if f.mu.nextSlot, ok, err = getUint64(r, keySlotSeq); err != nil {
		return err
	} else if !ok {
		f.mu.nextSlot = 1
	}
	if f.mu.applied, _, err = getUint64(r, keyApplied); err != nil {
		return err
	}
	f.mu.complete = f.mu.applied // raftkv stores whole Readies
	return nil
}

// loadSubmitRecordLocked loads the jobs of a submit record.
func (f *FSM) loadSubmitRecordLocked(sd *specDecoder, k, v []byte) error {
	if len(k) != len(prefixSubmit)+8 {
		return fmt.Errorf("%w: submit key %q", ErrCorrupt, k)
	}
	sub := &submitRecord{first: binary.BigEndian.Uint64(k[len(prefixSubmit):])}
	return decodeSubmit(sd, sub.first, v, func(j *job) error {
		if err := f.checkJobNumLocked("job", j.num); err != nil {
			return err
		}
		if f.mu.jobs.get(j.num) != nil {
			return fmt.Errorf("%w: job %d in two submit records", ErrCorrupt, j.num)
		}
		j.sub = sub
		sub.count++
		sub.live++
		f.mu.jobs.put(j)
		return nil
	})
}

// loadJobRecordLocked loads a job's own record over its submit record's.
func (f *FSM) loadJobRecordLocked(sd *specDecoder, k, v []byte) error {
	if len(k) != len(prefixJob)+8 {
		return fmt.Errorf("%w: job key %q", ErrCorrupt, k)
	}
	num := binary.BigEndian.Uint64(k[len(prefixJob):])
	if err := f.checkJobNumLocked("job", num); err != nil {
		return err
	}
	j, err := decodeJob(sd, num, v)
	if err != nil {
		return err
	}
	if old := f.mu.jobs.get(num); old != nil {
		j.sub = old.sub
	}
	f.mu.jobs.put(j)
	return nil
}

// loadForgottenLocked drops a job forgotten while its submit record held
// others.
func (f *FSM) loadForgottenLocked(k, v []byte) error {
	if len(k) != len(prefixForgotten)+8 || len(v) != 0 {
		return fmt.Errorf("%w: forgotten-job record %q", ErrCorrupt, k)
	}
	num := binary.BigEndian.Uint64(k[len(prefixForgotten):])
	j := f.mu.jobs.get(num)
	if j == nil || j.sub == nil {
		return fmt.Errorf("%w: job %d forgotten outside any submit record", ErrCorrupt, num)
	}
	if j.sub.live--; j.sub.live == 0 {
		return fmt.Errorf("%w: submit record of job %d kept with none of its jobs", ErrCorrupt, j.sub.first)
	}
	j.sub.marked = true
	f.mu.jobs.remove(num)
	return nil
}

// loadCapboxSetRecordLocked loads a capbox set; its appmaster is loaded.
func (f *FSM) loadCapboxSetRecordLocked(k, v []byte) error {
	if len(k) != len(prefixCapboxSet)+8 {
		return fmt.Errorf("%w: capbox set key %q", ErrCorrupt, k)
	}
	num := binary.BigEndian.Uint64(k[len(prefixCapboxSet):])
	if err := f.checkJobNumLocked("capbox set", num); err != nil {
		return err
	}
	return f.loadCapboxSetLocked(num, v)
}

// loadGroupRecordLocked loads a group's counters and requeue list into
// its job's group.
func (f *FSM) loadGroupRecordLocked(k, v []byte) error {
	k = k[len(prefixGroup):]
	if len(k) != 10 {
		return fmt.Errorf("%w: group key %q", ErrCorrupt, k)
	}
	j := f.mu.jobs.get(binary.BigEndian.Uint64(k))
	gi := int(binary.BigEndian.Uint16(k[8:]))
	if j == nil || gi >= len(j.groups) {
		return fmt.Errorf("%w: group %x without its job", ErrCorrupt, k)
	}
	return decodeGroupInto(j.groups[gi], v)
}

// loadNodeRecordLocked loads a node.
func (f *FSM) loadNodeRecordLocked(k, v []byte) error {
	n, err := decodeNode(v)
	if err != nil {
		return err
	}
	if n.spec.Name != string(k[len(prefixNode):]) {
		return fmt.Errorf("%w: node record %q under key %q", ErrCorrupt, n.spec.Name, k)
	}
	n.num = int32(len(f.mu.nodes))
	f.mu.nodes[n.spec.Name] = n
	f.mu.nodeList = append(f.mu.nodeList, n)
	return nil
}

// loadGenRecordLocked loads a node's target generation.
func (f *FSM) loadGenRecordLocked(k, v []byte) error {
	n := f.mu.nodes[string(k[len(prefixGen):])]
	if n == nil {
		return fmt.Errorf("%w: target generation %q without its node", ErrCorrupt, k)
	}
	if len(v) != 8 {
		return fmt.Errorf("%w: target generation %q of %d bytes", ErrCorrupt, k, len(v))
	}
	n.gen = binary.BigEndian.Uint64(v)
	return nil
}

// loadTaskRecordLocked loads the tasks of a task record into their group,
// and what the active ones hold on their nodes.
func (f *FSM) loadTaskRecordLocked(k, v []byte) error {
	key, ok := decodeTaskSuffix(k[len(prefixTask):])
	if !ok {
		return fmt.Errorf("%w: task key %x", ErrCorrupt, k)
	}
	ts, err := decodeTasks(key, v)
	if err != nil {
		return err
	}
	j := f.mu.jobs.get(key.job)
	if j == nil || int(key.group) >= len(j.groups) {
		return fmt.Errorf("%w: task %s without its job", ErrCorrupt, taskID(key, ts[0].attempt))
	}
	g := j.groups[key.group]
	// Records come in key order, and placed tasks are a prefix of
	// their group's indexes: each record but a group's last is full.
	if int64(key.index) != int64(len(g.tasks)) {
		return fmt.Errorf("%w: task %s follows %d tasks of its group", ErrCorrupt, taskID(key, ts[0].attempt), len(g.tasks))
	}
	for _, t := range ts {
		g.tasks = append(g.tasks, t)
		if !t.active() {
			continue
		}
		n := f.mu.nodes[t.node]
		if n == nil {
			return fmt.Errorf("%w: task %s on unknown node %q", ErrCorrupt, taskID(t.key, t.attempt), t.node)
		}
		n.addTask(t)
		n.addJobTasks(j, 1)
		f.holdLocked(n, j, g, 1)
		if t.ports != nil {
			if err := n.holdPorts(g, t); err != nil {
				return err
			}
		}
		if t.stop {
			n.release(j.qos, g.demand, 1)
		}
		g.active++
	}
	return nil
}

// loadSlotRecordLocked loads a cached slot onto its node.
func (f *FSM) loadSlotRecordLocked(k, v []byte) error {
	name, id, ok := strings.Cut(string(k[len(prefixSlot):]), "\x00")
	n := f.mu.nodes[name]
	if !ok || n == nil {
		return fmt.Errorf("%w: slot key %q without its node", ErrCorrupt, k)
	}
	s, err := decodeSlot(id, n, v)
	if err != nil {
		return err
	}
	f.addSlotLocked(s)
	return nil
}

// loadIdemRecordLocked loads an idempotency key and ties it to its job.
func (f *FSM) loadIdemRecordLocked(k, v []byte) error {
	if len(v) != 8 {
		return fmt.Errorf("%w: idempotency record %q", ErrCorrupt, k)
	}
	key, num := string(k[len(prefixIdem):]), binary.BigEndian.Uint64(v)
	j := f.mu.jobs.get(num)
	if j == nil {
		return fmt.Errorf("%w: idempotency key %q of job %d, which is not there", ErrCorrupt, key, num)
	}
	f.mu.idem[key], j.idem = num, key
	return nil
}

// settleLoadLocked derives what the records do not hold: the nodes in
// name order, every job's last change (the loaded index), the pending
// groups and the finished queue.
func (f *FSM) settleLoadLocked() {
	slices.SortFunc(f.mu.nodeList, byName)
	for j := range f.mu.jobs.all() {
		j.changed = f.mu.applied
		for _, g := range j.groups {
			f.syncPendingLocked(g)
		}
	}
	f.loadFinishedLocked()
	f.settleHistoryLocked()
}
