package jobfeed_test

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/jobfeed"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// source stands for the FSM: each job's last change, and the index all
// of whose commands are applied.
type source struct {
	mu       sync.Mutex
	changed  map[uint64]uint64
	complete uint64
}

func newSource() *source { return &source{changed: map[uint64]uint64{}} }

func (s *source) AppendJobChanges(dst []fsm.JobChange) ([]fsm.JobChange, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, num := range slices.Sorted(maps.Keys(s.changed)) {
		dst = append(dst, fsm.JobChange{Job: num, Index: s.changed[num]})
	}
	return dst, s.complete
}

func (s *source) AppendChangedJobs(dst []fsm.ChangedJob, nums []uint64) []fsm.ChangedJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, num := range nums {
		if c, ok := s.changed[num]; ok {
			dst = append(dst, fsm.ChangedJob{Changed: c, JobStatus: fsm.JobStatus{ID: fmt.Sprintf("j%d", num)}})
		} else {
			dst = append(dst, fsm.ChangedJob{})
		}
	}
	return dst
}

// want is the answer read from the source the simple way: every job
// changed in (from, through], by change then number, up to limit.
func (s *source) want(from, through uint64, limit int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	type jc struct{ num, index uint64 }
	var all []jc
	for num, c := range s.changed {
		if c > from && c <= through {
			all = append(all, jc{num, c})
		}
	}
	slices.SortFunc(all, func(a, b jc) int { return cmp.Or(cmp.Compare(a.index, b.index), cmp.Compare(a.num, b.num)) })
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	var out []string
	for _, j := range all {
		out = append(out, fmt.Sprintf("j%d@%d", j.num, j.index))
	}
	return out
}

func show(js []fsm.ChangedJob) []string {
	var out []string
	for _, j := range js {
		out = append(out, fmt.Sprintf("%s@%d", j.ID, j.Changed))
	}
	return out
}

// TestFeedAgreesWithTheSource applies random change sets (several
// commands per entry, forgotten jobs, some of them summarized, resets), dropping stale entries
// often, and checks after every entry that every reader, wherever it
// resumes from and whatever its limit, gets the jobs the source says
// changed after it.
func TestFeedAgreesWithTheSource(t *testing.T) {
	defer jobfeed.SetMinStale(2)()
	r := seedtest.Rand(t)
	src := newSource()
	feed := jobfeed.New(src)
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeReset})
	next := uint64(1) // the next job number
	index := uint64(0)
	// As in the FSM, a forgotten job never changes again; one forgotten
	// with a summary (summarized) leaves when its summary is pruned.
	const live, summarized, gone = 0, 1, 2
	state := map[uint64]int{}
	for step := range 500 {
		index++
		for range 1 + r.IntN(3) { // the commands of one entry
			c := &fsm.Changes{Kind: fsm.ChangeApplied, Index: index}
			for range r.IntN(4) {
				if r.IntN(4) == 0 || next == 1 {
					c.Jobs = append(c.Jobs, next)
					next++
				} else if n := 1 + r.Uint64N(next-1); state[n] == live {
					c.Jobs = append(c.Jobs, n)
				}
			}
			if r.IntN(5) == 0 && next > 1 {
				switch n := 1 + r.Uint64N(next-1); state[n] {
				case live: // forgotten, maybe with a summary the source answers now
					c.Forgotten = append(c.Forgotten, n)
					state[n] = gone
					if r.IntN(2) == 0 {
						c.Summarized = append(c.Summarized, n)
						state[n] = summarized
					}
				case summarized: // its summary pruned
					c.Forgotten = append(c.Forgotten, n)
					state[n] = gone
				}
			}
			slices.Sort(c.Jobs)
			c.Jobs = slices.Compact(c.Jobs)
			c.Jobs = slices.DeleteFunc(c.Jobs, func(n uint64) bool { return slices.Contains(c.Forgotten, n) })
			src.mu.Lock()
			for _, n := range c.Jobs {
				src.changed[n] = index
			}
			for _, n := range c.Forgotten {
				delete(src.changed, n)
			}
			for _, n := range c.Summarized {
				src.changed[n] = index
			}
			src.mu.Unlock()
			feed.Consume(c)
		}
		src.mu.Lock()
		src.complete = index
		src.mu.Unlock()
		feed.Consume(&fsm.Changes{Kind: fsm.ChangeComplete, Index: index})
		if r.IntN(200) == 0 { // a restore: the feed starts over from the source
			feed.Consume(&fsm.Changes{Kind: fsm.ChangeReset, Index: index})
		}
		for range 3 {
			from, limit := r.Uint64N(index+2), r.IntN(4)
			got, applied := feed.JobsChangedSince(from, limit)
			if applied != max(from, index) {
				t.Fatalf("step %d: JobsChangedSince(%d, %d) current as of %d, want %d", step, from, limit, applied, max(from, index))
			}
			if want := src.want(from, index, limit); !samePage(got, want, limit) {
				t.Fatalf("step %d: JobsChangedSince(%d, %d) = %v, want %v", step, from, limit, show(got), want)
			}
		}
	}
	// Stale entries were dropped: the log holds little more than a
	// current entry per job.
	if n, jobs := feed.LogLen(), len(src.changed); n > 2*jobs+2 {
		t.Errorf("log of %d entries for %d jobs", n, jobs)
	}
}

// samePage reports whether got is the page want, except that a page cut
// short by limit may hold other jobs of its last index (the commands of
// one entry are logged in their order, not by job): the watch drops that
// index from a full page, or reads it whole.
func samePage(got []fsm.ChangedJob, want []string, limit int) bool {
	g := show(got)
	if len(g) != len(want) {
		return false
	}
	cut := limit > 0 && len(want) == limit
	for i := range want {
		if g[i] == want[i] {
			continue
		}
		if !cut || got[i].Changed != got[len(got)-1].Changed || !strings.HasSuffix(want[i], fmt.Sprintf("@%d", got[i].Changed)) {
			return false
		}
	}
	return true
}

// TestFeedReaderBehindCompaction: a reader that last read long ago, before
// many changes and the dropping of stale entries, still gets every job
// changed since, once, at its last change.
func TestFeedReaderBehindCompaction(t *testing.T) {
	defer jobfeed.SetMinStale(4)()
	src := newSource()
	feed := jobfeed.New(src)
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeReset})
	apply := func(index uint64, jobs ...uint64) {
		src.mu.Lock()
		for _, n := range jobs {
			src.changed[n] = index
		}
		src.complete = index
		src.mu.Unlock()
		feed.Consume(&fsm.Changes{Kind: fsm.ChangeApplied, Index: index, Jobs: jobs})
		feed.Consume(&fsm.Changes{Kind: fsm.ChangeComplete, Index: index})
	}
	apply(1, 1, 2, 3)
	_, from := feed.JobsChangedSince(0, 0)
	before := feed.LogLen()
	for i := uint64(2); i < 100; i++ {
		apply(i, 1+i%2) // jobs 1 and 2 change again and again
	}
	if feed.LogLen() >= before+98 {
		t.Fatalf("no stale entry dropped: %d entries", feed.LogLen())
	}
	got, applied := feed.JobsChangedSince(from, 0)
	if want := []string{"j1@98", "j2@99"}; !slices.Equal(show(got), want) || applied != 99 {
		t.Fatalf("JobsChangedSince(%d) = %v as of %d, want %v as of 99", from, show(got), applied, want)
	}
}

// TestFeedOneEntryManyCommands: a raft entry may carry several commands,
// each published with the entry's index; until the entry is complete, a
// reader gets none of its changes, and then all of them.
func TestFeedOneEntryManyCommands(t *testing.T) {
	src := newSource()
	feed := jobfeed.New(src)
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeReset})
	src.changed[2], src.changed[1] = 4, 4
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeApplied, Index: 4, Jobs: []uint64{2}})
	if got, applied := feed.JobsChangedSince(3, 0); len(got) != 0 || applied != 3 {
		t.Fatalf("before the entry completes: %v as of %d", show(got), applied)
	}
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeApplied, Index: 4, Jobs: []uint64{1}})
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeComplete, Index: 4})
	if got, applied := feed.JobsChangedSince(3, 0); !slices.Equal(show(got), []string{"j1@4", "j2@4"}) || applied != 4 {
		t.Fatalf("after: %v as of %d", show(got), applied)
	}
}

// TestFeedSourceAhead: the FSM applies before the feed consumes; a job it
// changed or forgot since the feed's entry is left for a later answer,
// and the answer stops before that entry's index, so that a reader
// resuming from it misses nothing.
func TestFeedSourceAhead(t *testing.T) {
	src := newSource()
	feed := jobfeed.New(src)
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeReset})
	for i, jobs := range [][]uint64{{1}, {2, 3}, {4}} {
		index := uint64(i + 1)
		for _, n := range jobs {
			src.changed[n] = index
		}
		feed.Consume(&fsm.Changes{Kind: fsm.ChangeApplied, Index: index, Jobs: jobs})
		feed.Consume(&fsm.Changes{Kind: fsm.ChangeComplete, Index: index})
	}
	src.changed[3] = 4 // applied, not yet consumed
	delete(src.changed, 4)
	got, applied := feed.JobsChangedSince(0, 0)
	if !slices.Equal(show(got), []string{"j1@1"}) || applied != 1 {
		t.Fatalf("JobsChangedSince(0) = %v as of %d, want [j1@1] as of 1", show(got), applied)
	}
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeApplied, Index: 4, Jobs: []uint64{3}, Forgotten: []uint64{4}})
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeComplete, Index: 4})
	got, applied = feed.JobsChangedSince(applied, 0)
	if !slices.Equal(show(got), []string{"j2@2", "j3@4"}) || applied != 4 {
		t.Fatalf("then = %v as of %d, want [j2@2 j3@4] as of 4", show(got), applied)
	}
}

// TestFeedResetRebuilds: a reset (a Load, a snapshot restore) forgets
// what the feed derived and reads every job from the source, at the
// source's complete index.
func TestFeedResetRebuilds(t *testing.T) {
	src := newSource()
	feed := jobfeed.New(src)
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeReset})
	src.changed[1], src.complete = 5, 5
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeApplied, Index: 5, Jobs: []uint64{1}})
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeComplete, Index: 5})
	// A restore to another state: job 1 gone, jobs 7 and 8 loaded at 9.
	src.changed = map[uint64]uint64{7: 9, 8: 9}
	src.complete = 9
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeReset, Index: 9})
	if got, applied := feed.JobsChangedSince(0, 0); !slices.Equal(show(got), []string{"j7@9", "j8@9"}) || applied != 9 {
		t.Fatalf("after the reset: %v as of %d", show(got), applied)
	}
	if got, applied := feed.JobsChangedSince(5, 1); !slices.Equal(show(got), []string{"j7@9"}) || applied != 9 {
		t.Fatalf("after the reset, from 5, limit 1: %v as of %d", show(got), applied)
	}
}

// TestFeedIgnoresChangesSeenAtReset: a change set can come after the reset
// that already read it (Subscribe resets while a command is applied); the
// feed does not list the job twice.
func TestFeedIgnoresChangesSeenAtReset(t *testing.T) {
	src := newSource()
	src.changed[1], src.complete = 3, 3
	feed := jobfeed.New(src)
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeReset, Index: 3})
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeApplied, Index: 3, Jobs: []uint64{1}})
	feed.Consume(&fsm.Changes{Kind: fsm.ChangeComplete, Index: 3})
	if got, _ := feed.JobsChangedSince(0, 0); !slices.Equal(show(got), []string{"j1@3"}) || feed.LogLen() != 1 {
		t.Fatalf("%v, log of %d", show(got), feed.LogLen())
	}
}
