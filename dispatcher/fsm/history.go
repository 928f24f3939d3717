package fsm

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/api"
)

// cmdPruneHistory drops job summaries (PruneHistory).
const cmdPruneHistory byte = 17

// historyRecordVersion is the first byte of a job summary's record.
const historyRecordVersion = 1

// forgetToHistory is the flag of a ForgetJobs command that leaves a
// summary of each job it forgets.
const forgetToHistory = 1 << 0

// ForgetJobsToHistory is ForgetJobs that leaves a summary of each job it
// forgets (not of capbox sets), in the same command: its name, queue and
// labels, its submit, start and end times, its final state, its tasks'
// final counts and its first failure (see Summary). The summary is kept
// until a PruneHistory command names its job.
func ForgetJobsToHistory(now time.Time, ids []string) []byte {
	e := enc{b: ForgetJobs(now, ids)}
	e.uvarint(forgetToHistory) // absent in commands that keep no history
	return e.b
}

// PruneHistory returns the command that drops the summaries of the jobs
// ids names (HistoryPrunable says which are due); a job without a summary
// is left alone. The result decodes with DecodePruneResult.
func PruneHistory(now time.Time, ids []string) []byte {
	e := newCommand(cmdPruneHistory, now, 4+len(ids)*10)
	e.uvarint(uint64(len(ids)))
	for _, id := range ids {
		e.str(id)
	}
	return e.b
}

// PruneResult answers a PruneHistory command.
type PruneResult struct {
	Pruned int // summaries dropped
	Kept   int // jobs named without a summary
}

// DecodePruneResult decodes the result of a PruneHistory command.
func DecodePruneResult(b []byte) (PruneResult, error) {
	d := dec{b: b}
	r := PruneResult{int(d.uvarint()), int(d.uvarint())}
	return r, d.done("prune result")
}

// summary is a forgotten job's summary in memory: its record as stored,
// and what listing it filters on without decoding the record.
type summary struct {
	num   uint64
	ended int64  // unix nanoseconds
	rec   string // the record (summarize)
	queue string // a substring of rec
	state JobState
	// changed is the index of the command that forgot the job, or the
	// loaded index (as a job's last change is): the watch's index of
	// the summary.
	changed uint64
}

// histEnd places a summary in the order its job ended: by end, then
// number.
type histEnd struct {
	ended int64
	num   uint64
}

func cmpHistEnd(a, b histEnd) int {
	return cmp.Or(cmp.Compare(a.ended, b.ended), cmp.Compare(a.num, b.num))
}

// history holds every job summary: byNum sorted by job number (listing,
// paging and lookups), byEnd the same jobs by end (pruning: what is due is
// a prefix of it).
type history struct {
	byNum []summary
	byEnd []histEnd
}

// find returns the place of job num's summary in byNum, and whether it is
// there.
func (h *history) find(num uint64) (int, bool) {
	return slices.BinarySearchFunc(h.byNum, num, func(s summary, n uint64) int { return cmp.Compare(s.num, n) })
}

// add adds summaries of jobs that have none, in any order.
func (h *history) add(ss []summary) {
	if len(ss) == 0 {
		return
	}
	slices.SortFunc(ss, func(a, b summary) int { return cmp.Compare(a.num, b.num) })
	ends := make([]histEnd, len(ss))
	for i, s := range ss {
		ends[i] = histEnd{s.ended, s.num}
	}
	slices.SortFunc(ends, cmpHistEnd)
	h.byNum = mergeSorted(h.byNum, ss, func(a, b summary) int { return cmp.Compare(a.num, b.num) })
	h.byEnd = mergeSorted(h.byEnd, ends, cmpHistEnd)
}

// mergeSorted merges b into a, both sorted by c, and returns the result
// (in a's array when it has room). Jobs mostly end in the order they were
// numbered, so b mostly goes after a, which costs no merge.
func mergeSorted[T any](a, b []T, c func(T, T) int) []T {
	n := len(a)
	if n == 0 || c(a[n-1], b[0]) < 0 {
		return append(a, b...)
	}
	a = slices.Grow(a, len(b))[:n+len(b)]
	i, j := n-1, len(b)-1
	for k := len(a) - 1; j >= 0; k-- {
		if i >= 0 && c(a[i], b[j]) > 0 {
			a[k] = a[i]
			i--
		} else {
			a[k] = b[j]
			j--
		}
	}
	return a
}

// remove drops the summaries of the jobs in gone.
func (h *history) remove(gone map[uint64]bool) {
	h.byNum = slices.DeleteFunc(h.byNum, func(s summary) bool { return gone[s.num] })
	h.byEnd = slices.DeleteFunc(h.byEnd, func(e histEnd) bool { return gone[e.num] })
}

// summarize encodes the summary of j, a job (not a capbox set) being
// forgotten, with its tasks still in place; buf is reused.
func summarize(buf []byte, j *job) (summary, []byte) {
	e := enc{b: buf[:0]}
	e.byte(historyRecordVersion)
	var started int64
	var n GroupStatus
	var first *task
	for _, g := range j.groups {
		if g.started != 0 && (started == 0 || g.started < started) {
			started = g.started
		}
		n.Count += g.count
		n.Succeeded += g.succeeded
		n.Failed += g.failed
		n.Killed += g.killed
		for _, t := range g.tasks {
			if failure(t) && (first == nil || t.updated < first.updated) {
				first = t
			}
		}
	}
	ended := max(lastChange(j), 1)
	state := j.state()
	e.varint(j.submitted)
	e.varint(started)
	e.varint(ended)
	e.byte(byte(state))
	name, queue, labels := specHead(j)
	e.str(name)
	at := len(e.b)
	e.str(queue)
	e.b = append(e.b, labels...)
	for _, v := range []int64{n.Count, n.Succeeded, n.Failed, n.Killed} {
		e.uvarint(uint64(v))
	}
	e.bool(first != nil)
	if first != nil {
		e.uvarint(uint64(first.key.group))
		e.uvarint(uint64(first.key.index))
		e.uvarint(uint64(first.attempt))
		e.byte(byte(first.state))
		e.str(string(first.reason))
		e.varint(int64(first.exitCode))
		e.varint(first.updated)
	}
	rec := string(e.b)
	q, _ := readStr(rec, at)
	return summary{num: j.num, ended: ended, rec: rec, queue: q, state: state}, e.b
}

// failure reports whether t, of a finished job, ended in a failure its
// user did not ask for: failed, lost, or killed but not stopped by a
// cancel.
func failure(t *task) bool {
	switch t.state {
	case api.TaskFailed, api.TaskLost:
		return true
	case api.TaskKilled:
		return !t.stop
	}
	return false
}

// specHead returns j's name and queue, and its labels in appendStrMap's
// encoding, without decoding its spec when it is still encoded: the
// encoding starts with the name, queue, pool, priority, QoS and labels
// (appendJobSpec), which skimSpec accepted when the job was submitted.
func specHead(j *job) (name, queue, labels string) {
	if s := j.specEnc; s != "" && j.spec.Load() == nil {
		name, i := readStr(s, 0)
		queue, i = readStr(s, i)
		i = skipStr(s, i)
		_, i = readVarint(s, i)
		i = skipStr(s, i)
		if end := skipStrMap(s, i); i >= 0 && end >= i {
			return name, queue, s[i:end]
		}
	}
	spec := j.specOf()
	var e enc
	appendStrMap(&e, spec.Labels)
	return spec.Name, spec.Queue, string(e.b)
}

// decodeSummary decodes the record of job num's summary.
func decodeSummary(num uint64, rec string) (summary, JobStatus, error) {
	d := stringDec(rec)
	if v := d.byte(); v != historyRecordVersion {
		return summary{}, JobStatus{}, fmt.Errorf("%w: summary of job %d: version %d", ErrCorrupt, num, v)
	}
	s := JobStatus{ID: jobID(num), History: true}
	submitted, started, ended := d.varint(), d.varint(), d.varint()
	s.State = JobState(d.byte())
	s.Spec.Name = d.str()
	s.Spec.Queue = d.str()
	if n := d.count(2); n > 0 {
		s.Spec.Labels = make(map[string]string, n)
		prev := ""
		for k := range n {
			key, v := d.str(), d.str()
			if k > 0 && key <= prev {
				d.fail("summary labels")
			}
			s.Spec.Labels[key], prev = v, key
		}
	}
	t := &s.Totals
	t.Count, t.Succeeded, t.Failed, t.Killed = int64(d.uvarint()), int64(d.uvarint()), int64(d.uvarint()), int64(d.uvarint())
	if d.bool() {
		group, index, attempt := d.uvarint(), d.uvarint(), d.uvarint()
		f := &TaskFailure{State: api.TaskState(d.byte()), Reason: api.TaskReason(d.str()), ExitCode: int32(d.varint())}
		f.At = time.Unix(0, d.varint()).UTC()
		if group > 0xffff || index > 0xffffffff || attempt > 0xffffffff || !f.State.Done() {
			d.fail("summary failure")
		}
		f.TaskID = taskID(taskKey{num, uint16(group), uint32(index)}, uint32(attempt))
		s.FirstFailure = f
	}
	if err := d.done(fmt.Sprintf("summary of job %d", num)); err != nil {
		return summary{}, JobStatus{}, err
	}
	if s.State < JobSucceeded || s.State > JobCancelled || ended <= 0 {
		return summary{}, JobStatus{}, fmt.Errorf("%w: summary of job %d: state %d, end %d", ErrCorrupt, num, s.State, ended)
	}
	s.Submitted = time.Unix(0, submitted).UTC()
	s.Ended = time.Unix(0, ended).UTC()
	s.Started = unixTime(started)
	return summary{num: num, ended: ended, rec: rec, queue: s.Spec.Queue, state: s.State}, s, nil
}

// status returns the summary as a JobStatus.
func (s *summary) status() JobStatus {
	// Apply or Load decoded the record once; it cannot fail now.
	_, st, _ := decodeSummary(s.num, s.rec)
	return st
}

// TaskFailure is a task's failure as a job's summary keeps it.
type TaskFailure struct {
	TaskID   string // the attempt's
	State    api.TaskState
	Reason   api.TaskReason
	ExitCode int32
	At       time.Time
}

// Summary returns the summary of the forgotten job with the given ID.
func (f *FSM) Summary(id string) (JobStatus, bool) {
	num, ok := parseJobID(id)
	if !ok {
		return JobStatus{}, false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	i, ok := f.mu.history.find(num)
	if !ok {
		return JobStatus{}, false
	}
	return f.mu.history.byNum[i].status(), true
}

// HistoryLen returns how many job summaries are kept.
func (f *FSM) HistoryLen() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.mu.history.byNum)
}

// HistoryPrunable returns, by ID, up to limit summaries due to be
// dropped, those of the jobs that ended first: every one whose job ended
// at or before before, and the oldest beyond the newest keep (a negative
// keep bounds nothing). What a PruneHistory command names.
func (f *FSM) HistoryPrunable(before time.Time, keep, limit int) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h := &f.mu.history.byEnd
	n, _ := slices.BinarySearchFunc(*h, before.UnixNano(), func(e histEnd, t int64) int {
		return cmp.Compare(e.ended, t+1)
	})
	if keep >= 0 {
		n = max(n, len(*h)-keep)
	}
	n = min(n, limit)
	ids := make([]string, n)
	for i, e := range (*h)[:n] {
		ids[i] = jobID(e.num)
	}
	return ids
}

// pruneLocked applies a PruneHistory command.
func (f *FSM) pruneLocked(w writer, d *dec) ([]byte, error) {
	ids := make([]string, d.count(1))
	for i := range ids {
		ids[i] = d.str()
	}
	if err := d.done("prune command"); err != nil {
		return nil, err
	}
	if len(ids) > MaxForget {
		return nil, fmt.Errorf("fsm: prune history: %d jobs, more than %d", len(ids), MaxForget)
	}
	var res PruneResult
	gone := map[uint64]bool{}
	for _, id := range ids {
		num, ok := parseJobID(id)
		if _, found := f.mu.history.find(num); !ok || !found || gone[num] {
			res.Kept++
			continue
		}
		res.Pruned++
		gone[num] = true
		w.Delete(numKey(prefixHistory, num))
	}
	f.mu.history.remove(gone)
	c := &f.feed.c
	n := len(c.Forgotten)
	for num := range gone {
		c.Forgotten = append(c.Forgotten, num)
	}
	slices.Sort(c.Forgotten[n:])
	return encodeUvarints(uint64(res.Pruned), uint64(res.Kept)), nil
}

// loadSummaryLocked loads a job summary. Jobs are loaded before: a
// summary is of a forgotten job, numbered within the job sequence.
func (f *FSM) loadSummaryLocked(k, v []byte) error {
	if len(k) != len(prefixHistory)+8 {
		return fmt.Errorf("%w: summary key %q", ErrCorrupt, k)
	}
	num := binary.BigEndian.Uint64(k[len(prefixHistory):])
	if err := f.checkJobNumLocked("summary", num); err != nil {
		return err
	}
	if f.mu.jobs.get(num) != nil {
		return fmt.Errorf("%w: summary of job %d, which is not forgotten", ErrCorrupt, num)
	}
	s, _, err := decodeSummary(num, string(v))
	if err != nil {
		return err
	}
	// Records come in key order, that is by number.
	h := &f.mu.history
	h.byNum = append(h.byNum, s)
	h.byEnd = append(h.byEnd, histEnd{s.ended, num})
	return nil
}

// settleHistoryLocked orders the loaded summaries by end, and makes the
// loaded index their last change.
func (f *FSM) settleHistoryLocked() {
	slices.SortFunc(f.mu.history.byEnd, cmpHistEnd)
	for i := range f.mu.history.byNum {
		f.mu.history.byNum[i].changed = f.mu.applied
	}
}

// from returns the place in byNum of the first summary numbered after
// after.
func (h *history) from(after uint64) int {
	i, _ := h.find(after + 1)
	return i
}

// selectsSummary reports whether filter selects s by its queue and state.
func (filter *JobFilter) selectsSummary(s *summary) bool {
	if filter.Queue != "" && s.queue != filter.Queue {
		return false
	}
	return len(filter.States) == 0 || slices.Contains(filter.States, s.state)
}
