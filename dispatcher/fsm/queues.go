package fsm

import (
	"github.com/sluicehq/sluice/api"
	"slices"
	"strings"
)

// QueueCount is what one queue holds: its jobs by state and their tasks.
type QueueCount struct {
	Name string
	// Jobs counts the queue's jobs by state (capbox sets are counted
	// with their tasks, not as jobs).
	Jobs [NumJobStates]int64
	// Tasks sums the groups of the queue's jobs and capbox sets.
	Tasks GroupStatus
	// Used is what the queue's active tasks hold, both tiers together.
	Used api.Capacity
}

// queueCountChunk bounds the jobs QueueCounts reads under one hold of
// the lock: a summary of a large cluster must not hold up apply.
const queueCountChunk = 4096

// walkJobs calls each with every job, in number order, reading chunk jobs
// under each hold of the read lock so that apply runs in between, and
// then atEnd (when not nil) under the last hold.
func (f *FSM) walkJobs(chunk int, each func(*job), atEnd func()) {
	for next, done := uint64(1), false; !done; {
		f.mu.RLock()
		done = true
		n := 0
		for j := range f.mu.jobs.from(next) {
			if n == chunk {
				next, done = j.num, false
				break
			}
			n++
			each(j)
		}
		if done && atEnd != nil {
			atEnd()
		}
		f.mu.RUnlock()
	}
}

// QueueCounts returns every queue that holds a job, by name: a pass over
// the jobs that copies no spec, for summaries of the whole cluster. It
// reads the jobs in chunks, letting apply run in between, so that its
// counts are of a moment per chunk rather than of one instant.
func (f *FSM) QueueCounts() []QueueCount { return f.queueCounts(queueCountChunk) }

// queueCounts is QueueCounts reading chunk jobs under each hold of the
// lock.
func (f *FSM) queueCounts(chunk int) []QueueCount {
	byName := map[string]*QueueCount{}
	f.walkJobs(chunk, func(j *job) {
		q := byName[j.queue]
		if q == nil {
			q = &QueueCount{Name: j.queue}
			byName[j.queue] = q
		}
		if j.owner() == nil {
			q.Jobs[j.state()]++
		}
		for _, g := range j.groups {
			t := &q.Tasks
			t.Count += g.count
			t.Pending += g.pending()
			t.Retrying += int64(len(g.requeue))
			t.Active += g.active
			t.Succeeded += g.succeeded
			t.Failed += g.failed
			t.Killed += g.killed
		}
	}, func() {
		for name, used := range f.mu.queueUsed {
			if q := byName[name]; q != nil {
				q.Used = used
			}
		}
	})
	out := make([]QueueCount, 0, len(byName))
	for _, q := range byName {
		out = append(out, *q)
	}
	slices.SortFunc(out, func(a, b QueueCount) int { return strings.Compare(a.Name, b.Name) })
	return out
}
