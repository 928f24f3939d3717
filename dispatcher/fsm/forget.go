package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// cmdForget forgets finished jobs (ForgetJobs).
const cmdForget byte = 12

// MaxForget bounds the jobs one ForgetJobs command names.
const MaxForget = 10_000

// maxRunGap bounds how far apart two forgotten jobs' numbers may be and
// still share one range deletion of their records: every number between
// them must be forgotten already, and looking further costs more than a
// second range.
const maxRunGap = 256

// ForgetJobs returns the command that forgets finished jobs, by ID: each
// that is finished (see FSM.Forgettable) loses its records, its task
// records, its idempotency key and its place in memory, with its capbox
// sets if it is an appmaster; any other (unknown, already forgotten, not
// finished, a capbox set) is left as it is. The result decodes with
// DecodeForgetResult.
func ForgetJobs(now time.Time, ids []string) []byte {
	e := newCommand(cmdForget, now, 4+len(ids)*10)
	e.uvarint(uint64(len(ids)))
	for _, id := range ids {
		e.str(id)
	}
	return e.b
}

// ForgetResult answers a ForgetJobs command.
type ForgetResult struct {
	Forgotten int // jobs forgotten (capbox sets not counted)
	Kept      int // jobs named that were not
}

// DecodeForgetResult decodes the result of a ForgetJobs command.
func DecodeForgetResult(b []byte) (ForgetResult, error) {
	d := dec{b: b}
	r := ForgetResult{int(d.uvarint()), int(d.uvarint())}
	return r, d.done("forget result")
}

// settled reports whether j has ended (succeeded, failed or cancelled)
// with no task pending or active. A job that succeeded or failed has
// every task done, so none pending or active; a cancelled one may still
// have tasks stopping.
func settled(j *job) bool {
	if !j.cancelled {
		return j.state() >= JobSucceeded
	}
	for _, g := range j.groups {
		if g.active > 0 || g.pending() > 0 {
			return false
		}
	}
	return true
}

// finished reports whether j is done for good: settled, and so is every
// capbox set of it. Nothing brings a finished job back (an ended
// appmaster gets no new sets, an ended task no new attempt). A capbox set
// is never finished alone: it goes with its appmaster.
func finished(j *job) bool {
	if j.owner() != nil || !settled(j) {
		return false
	}
	for _, s := range j.sets() {
		if !settled(s) {
			return false
		}
	}
	return true
}

// finishedQueue lists finished jobs in the order they finished (after a
// Load, by their last change), from head on; forgotten ones leave it when
// they reach its head.
type finishedQueue struct {
	jobs []*job
	head int
	// kept counts the jobs in it not forgotten: a ForgetJobs command
	// forgets only finished jobs, each of which is in it.
	kept int
}

func (q *finishedQueue) push(j *job) { q.jobs, q.kept = append(q.jobs, j), q.kept+1 }

// trim drops the forgotten jobs at the head, and the room they took once
// it is most of the list.
func (q *finishedQueue) trim() {
	for q.head < len(q.jobs) && q.jobs[q.head].forgotten {
		q.jobs[q.head] = nil
		q.head++
	}
	if q.head > 1024 && q.head > len(q.jobs)/2 {
		n := copy(q.jobs, q.jobs[q.head:])
		clear(q.jobs[n:])
		q.jobs, q.head = q.jobs[:n], 0
	}
}

// noteFinishedLocked records, at time now, that j (or, for a capbox set,
// its appmaster) finished, if it just did.
func (f *FSM) noteFinishedLocked(j *job, now int64) {
	if o := j.owner(); o != nil {
		j = o
	}
	if j.ended != 0 || !finished(j) {
		return
	}
	j.ended = max(now, 1)
	f.mu.finished.push(j)
}

// Forgettable returns up to limit finished jobs that ended at or before
// before, oldest first, by ID: what a ForgetJobs command may name.
func (f *FSM) Forgettable(before time.Time, limit int) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	cut := before.UnixNano()
	var ids []string
	q := &f.mu.finished
	for _, j := range q.jobs[q.head:] {
		if len(ids) == limit || j.ended > cut {
			break
		}
		if !j.forgotten {
			ids = append(ids, j.id)
		}
	}
	return ids
}

// ForgettableBeyond returns up to limit of the finished jobs beyond the
// keep that finished last, oldest first, by ID: what a ForgetJobs command
// names to hold the finished jobs kept to a count. Like Forgettable's,
// its answer is a prefix of the finished jobs in the order they finished,
// so the longer of the two answers holds the other.
func (f *FSM) ForgettableBeyond(keep, limit int) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	q := &f.mu.finished
	var ids []string
	for _, j := range q.jobs[q.head:] {
		if len(ids) == limit || len(ids) >= q.kept-keep {
			break
		}
		if !j.forgotten {
			ids = append(ids, j.id)
		}
	}
	return ids
}

// forgetLocked applies a ForgetJobs command.
func (f *FSM) forgetLocked(w writer, d *dec) ([]byte, error) {
	ids := make([]string, d.count(1))
	for i := range ids {
		ids[i] = d.str()
	}
	var flags uint64
	if len(d.b) > 0 {
		flags = d.uvarint()
	}
	if err := d.done("forget command"); err != nil {
		return nil, err
	}
	if len(ids) > MaxForget {
		return nil, fmt.Errorf("fsm: forget: %d jobs, more than %d", len(ids), MaxForget)
	}
	if flags&^forgetToHistory != 0 {
		return nil, fmt.Errorf("%w: forget command flags %#x", ErrCorrupt, flags)
	}
	var res ForgetResult
	var gone []*job // the jobs forgotten and their capbox sets
	var sums []summary
	for _, id := range ids {
		num, ok := parseJobID(id)
		j := f.mu.jobs.get(num)
		if !ok || j == nil || j.forgotten || !finished(j) {
			res.Kept++
			continue
		}
		res.Forgotten++
		if flags&forgetToHistory != 0 {
			var s summary
			s, f.vbuf = summarize(f.vbuf, j)
			s.changed = f.feed.c.Index
			w.Set(numKey(prefixHistory, j.num), f.vbuf)
			sums = append(sums, s)
		}
		j.forgotten = true
		f.mu.finished.kept--
		gone = append(gone, j)
		for _, s := range j.sets() {
			s.forgotten = true
			gone = append(gone, s)
		}
	}
	slices.SortFunc(gone, func(a, b *job) int { return cmp.Compare(a.num, b.num) })
	f.deleteRecordsLocked(w, gone)
	f.releaseSubmitsLocked(w, gone)
	for _, j := range gone {
		f.dropJobLocked(w, j)
		f.feed.c.Forgotten = append(f.feed.c.Forgotten, j.num)
	}
	f.mu.finished.trim()
	f.mu.history.add(sums) // sorts sums by number
	for _, s := range sums {
		f.feed.c.Summarized = append(f.feed.c.Summarized, s.num)
	}
	return encodeUvarints(uint64(res.Forgotten), uint64(res.Kept)), nil
}

// deleteRecordsLocked deletes the records numbered by the jobs in gone
// (sorted by number, marked forgotten): one range deletion per prefix for
// each run of numbers that are all forgotten.
func (f *FSM) deleteRecordsLocked(w writer, gone []*job) {
	for i := 0; i < len(gone); {
		first, last := gone[i].num, gone[i].num
		for i++; i < len(gone) && f.forgottenBetween(last, gone[i].num); i++ {
			last = gone[i].num
		}
		for _, p := range [...]string{prefixJob, prefixCapboxSet, prefixGroup, prefixTask, prefixCapTask} {
			w.DeleteRange(numKey(p, first), numKey(p, last+1))
		}
	}
}

// forgottenBetween reports whether every job numbered after a and before
// b is forgotten, b-a being at most maxRunGap.
func (f *FSM) forgottenBetween(a, b uint64) bool {
	if b-a > maxRunGap {
		return false
	}
	for k := a + 1; k < b; k++ {
		if j := f.mu.jobs.get(k); j != nil && !j.forgotten {
			return false
		}
	}
	return true
}

// releaseSubmitsLocked takes the jobs in gone out of their submit
// records: a record goes with its last job (with the markers of those
// forgotten before it), and a job forgotten before that leaves a marker.
func (f *FSM) releaseSubmitsLocked(w writer, gone []*job) {
	for _, j := range gone {
		if j.sub != nil {
			j.sub.live--
		}
	}
	for _, j := range gone {
		switch s := j.sub; {
		case s == nil:
		case s.live > 0:
			w.Set(numKey(prefixForgotten, j.num), nil)
			s.marked = true
		case s.count > 0:
			w.Delete(numKey(prefixSubmit, s.first))
			if s.marked {
				w.DeleteRange(numKey(prefixForgotten, s.first), numKey(prefixForgotten, s.first+uint64(s.count)))
			}
			s.count = 0 // deleted
		}
	}
}

// dropJobLocked removes j, forgotten, from memory, with its idempotency
// key.
func (f *FSM) dropJobLocked(w writer, j *job) {
	f.mu.jobs.remove(j.num)
	if j.idem != "" {
		delete(f.mu.idem, j.idem)
		w.Delete(idemKey(j.idem))
	}
	if j.owner() != nil {
		for _, t := range j.groups[0].tasks {
			delete(f.mu.captasks, t.key)
		}
	}
	// The job's memory is shared with the rest of its submit command's
	// (submitLocked); its tasks are its own.
	for _, g := range j.groups {
		g.tasks, g.requeue = nil, nil
	}
}

// lastChange returns the time of j's last change it has a record of: its
// tasks' (and its capbox sets' tasks') last reports, or its submit.
func lastChange(j *job) int64 {
	t := j.submitted
	for _, x := range append([]*job{j}, j.sets()...) {
		for _, g := range x.groups {
			for _, tk := range g.tasks {
				t = max(t, tk.updated)
			}
		}
	}
	return t
}

// loadFinishedLocked rebuilds the finished queue after a Load, ordered
// by each job's last change.
func (f *FSM) loadFinishedLocked() {
	var fin []*job
	for j := range f.mu.jobs.all() {
		if finished(j) {
			j.ended = max(lastChange(j), 1)
			fin = append(fin, j)
		}
	}
	slices.SortFunc(fin, func(a, b *job) int { return cmp.Or(cmp.Compare(a.ended, b.ended), cmp.Compare(a.num, b.num)) })
	f.mu.finished = finishedQueue{jobs: fin, kept: len(fin)}
}
