package jobfeed

import (
	"cmp"
	"slices"
	"sort"
	"sync"

	"github.com/sluicehq/sluice/dispatcher/fsm"
)

// Source is what a Feed reads from the FSM: *fsm.FSM.
type Source interface {
	// AppendJobChanges appends every job's number and last change, and
	// returns them with the FSM's complete index (fsm.FSM's).
	AppendJobChanges(dst []fsm.JobChange) ([]fsm.JobChange, uint64)
	// AppendChangedJobs appends the status and last change of the jobs
	// numbered nums, in order, a zero fsm.ChangedJob for one gone.
	AppendChangedJobs(dst []fsm.ChangedJob, nums []uint64) []fsm.ChangedJob
}

// minStale is how many stale entries a feed's log may hold before it
// drops them (a variable for tests).
var minStale = 1024

// Feed is the watch feed. Its methods are safe for concurrent use;
// Consume must be called with the change sets of one FSM, in order (as
// fsm.FSM.Subscribe calls its function).
type Feed struct {
	src Source
	mu  sync.RWMutex
	// Every field below is guarded by mu.
	log      []entry
	stale    int
	last     table
	complete uint64
	// scratch is Consume's, for a reset.
	scratch []fsm.JobChange
}

// entry is the change of job num by a command at index.
type entry struct{ index, num uint64 }

// New returns a feed reading job statuses from src. It is empty until it
// consumes a reset (fsm.ChangeReset), which Subscribe gives first:
//
//	feed := jobfeed.New(f)
//	unsubscribe := f.Subscribe(feed.Consume)
func New(src Source) *Feed {
	return &Feed{src: src}
}

// Consume updates the feed with one change set: the jobs it names
// changed at its index, and so did its summarized ones (to their
// summaries); its other forgotten jobs leave the feed; a completion
// moves the index answers are current as of; a reset rebuilds the feed
// from the source.
func (f *Feed) Consume(c *fsm.Changes) {
	switch c.Kind {
	case fsm.ChangeReset:
		// Read outside the lock: the source takes its own.
		js, complete := f.src.AppendJobChanges(f.scratch[:0])
		slices.SortFunc(js, func(a, b fsm.JobChange) int { return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.Job, b.Job)) })
		f.mu.Lock()
		defer f.mu.Unlock()
		f.log, f.stale, f.last = f.log[:0], 0, table{}
		for _, j := range js {
			if j.Index == 0 {
				continue // never changed: not in the feed until it is
			}
			f.log = append(f.log, entry{j.Index, j.Job})
			f.last.set(j.Job, j.Index)
		}
		f.complete = complete
		clear(js)
		f.scratch = js[:0]
	case fsm.ChangeComplete:
		f.mu.Lock()
		defer f.mu.Unlock()
		f.complete = max(f.complete, c.Index)
	case fsm.ChangeApplied:
		if len(c.Jobs) == 0 && len(c.Forgotten) == 0 {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, num := range c.Jobs {
			f.changedLocked(num, c.Index)
		}
		for _, num := range c.Forgotten {
			if _, summarized := slices.BinarySearch(c.Summarized, num); summarized {
				f.changedLocked(num, c.Index) // to its summary
			} else if f.last.get(num) != 0 {
				f.stale++
				f.last.set(num, 0)
			}
		}
		if f.stale > len(f.log)/2 && f.stale > minStale {
			f.compactLocked()
		}
	}
}

// changedLocked enters job num's change at index, once an index.
func (f *Feed) changedLocked(num, index uint64) {
	switch last := f.last.get(num); {
	case last >= index:
		return // another command of the entry, or already read at a reset
	case last != 0:
		f.stale++
	}
	f.last.set(num, index)
	f.log = append(f.log, entry{index, num})
}

// compactLocked drops the stale entries, keeping the others in order.
func (f *Feed) compactLocked() {
	w := 0
	for _, e := range f.log {
		if f.last.get(e.num) == e.index {
			f.log[w] = e
			w++
		}
	}
	clear(f.log[w:])
	f.log, f.stale = f.log[:w], 0
}

// JobsChangedSince returns up to limit (0: all) jobs changed by a command
// after index from, in the order of their last change (then by number),
// each with the index of that change, and the index they are current as
// of: the last one all of whose commands the feed consumed (a raft entry
// may carry several commands, and a change by a later command of the
// entry being applied is in a later answer). A watcher resumes with the
// Changed of the last job it saw, or with that index once it has seen
// every job.
func (f *Feed) JobsChangedSince(from uint64, limit int) (jobs []fsm.ChangedJob, applied uint64) {
	var es []entry
	f.mu.RLock()
	through := f.complete
	for i := sort.Search(len(f.log), func(i int) bool { return f.log[i].index > from }); i < len(f.log); i++ {
		e := f.log[i]
		if e.index > through {
			break // more commands of this entry may come
		}
		if f.last.get(e.num) != e.index {
			continue // the job changed again later, or was forgotten
		}
		if limit > 0 && len(es) == limit {
			break
		}
		es = append(es, e)
	}
	f.mu.RUnlock()
	// The log is in index order; the commands of one entry are not in
	// job order.
	slices.SortFunc(es, func(a, b entry) int { return cmp.Or(cmp.Compare(a.index, b.index), cmp.Compare(a.num, b.num)) })
	nums := make([]uint64, len(es))
	for i, e := range es {
		nums[i] = e.num
	}
	js := f.src.AppendChangedJobs(make([]fsm.ChangedJob, 0, len(es)), nums)
	// The FSM may be ahead of the feed: a job it changed again or
	// forgot since comes in a later answer, at that later index, or not
	// at all, and every job from the index of its entry on comes later
	// too, so that an answer never ends inside an index. The answer then
	// holds every job changed up to the index before (es holds every
	// entry up to it) and is current as of that index.
	for i, j := range js {
		if j.Changed != es[i].index {
			through = min(through, es[i].index-1)
			break
		}
	}
	jobs = js[:0]
	for i, j := range js {
		if j.Changed == es[i].index && j.Changed <= through {
			jobs = append(jobs, j)
		}
	}
	return jobs, max(from, through)
}

// table maps job numbers, dense from 1, to indexes, in pages freed when
// they hold no index, as the FSM's table of jobs frees the pages of
// forgotten jobs.
type table struct {
	pages []*page
}

const pageLen = 1024

type page struct {
	index [pageLen]uint64
	used  int
}

func (t *table) get(num uint64) uint64 {
	p := num / pageLen
	if p >= uint64(len(t.pages)) || t.pages[p] == nil {
		return 0
	}
	return t.pages[p].index[num%pageLen]
}

// set sets num's index; 0 removes it.
func (t *table) set(num, index uint64) {
	p := num / pageLen
	if p >= uint64(len(t.pages)) {
		if index == 0 {
			return
		}
		t.pages = append(t.pages, make([]*page, p+1-uint64(len(t.pages)))...)
	}
	pg := t.pages[p]
	if pg == nil {
		if index == 0 {
			return
		}
		pg = &page{}
		t.pages[p] = pg
	}
	old := &pg.index[num%pageLen]
	switch {
	case *old == 0 && index != 0:
		pg.used++
	case *old != 0 && index == 0:
		pg.used--
	}
	*old = index
	if pg.used == 0 {
		t.pages[p] = nil
	}
}
