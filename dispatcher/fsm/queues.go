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
	Jobs [JobCancelled + 1]int64
	// Tasks sums the groups of the queue's jobs and capbox sets.
	Tasks GroupStatus
	// Used is what the queue's active tasks hold, both tiers together.
	Used api.Capacity
}

// QueueCounts returns every queue that holds a job, by name: one pass
// over the jobs that copies no spec, for summaries of the whole cluster.
func (f *FSM) QueueCounts() []QueueCount {
	f.mu.RLock()
	defer f.mu.RUnlock()
	byName := map[string]*QueueCount{}
	for j := range f.mu.jobs.all() {
		q := byName[j.queue]
		if q == nil {
			q = &QueueCount{Name: j.queue}
			byName[j.queue] = q
		}
		if j.owner() == nil {
			if st := j.state(); int(st) < len(q.Jobs) {
				q.Jobs[st]++
			}
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
	}
	for name, used := range f.mu.queueUsed {
		if q := byName[name]; q != nil {
			q.Used = used
		}
	}
	out := make([]QueueCount, 0, len(byName))
	for _, q := range byName {
		out = append(out, *q)
	}
	slices.SortFunc(out, func(a, b QueueCount) int { return strings.Compare(a.Name, b.Name) })
	return out
}
