package fsm

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/seedtest"
)

// TestChangeLogAgreesWithASlice runs random changes, compactions and
// searches on a changeLog and on a plain slice kept the simple way, across
// chunk boundaries, and checks that the two always hold the same entries.
func TestChangeLogAgreesWithASlice(t *testing.T) {
	r := seedtest.Rand(t)
	for round := range 20 {
		var (
			l     changeLog
			model []jobChange
			jobs  []*job
			index uint64
		)
		for range r.IntN(4 * changeChunk) {
			index += uint64(r.IntN(3)) // several changes may share an index
			var j *job
			if len(jobs) > 0 && r.IntN(3) == 0 {
				j = jobs[r.IntN(len(jobs))] // changes again: its older entry goes stale
				if j.changed == index {
					continue
				}
			} else {
				j = &job{}
				jobs = append(jobs, j)
			}
			j.changed = index
			l.add(jobChange{index, j})
			model = append(model, jobChange{index, j})
			if r.IntN(2000) == 0 {
				l.compact()
				model = slices.DeleteFunc(model, func(c jobChange) bool { return !c.current() })
			}
		}
		if r.IntN(2) == 0 {
			l.compact()
			model = slices.DeleteFunc(model, func(c jobChange) bool { return !c.current() })
		}
		if l.len() != len(model) {
			t.Fatalf("round %d: %d entries, want %d", round, l.len(), len(model))
		}
		for i, c := range model {
			if l.at(i) != c {
				t.Fatalf("round %d: entry %d is %+v, want %+v", round, i, l.at(i), c)
			}
		}
		for range 50 {
			want := uint64(r.IntN(int(index) + 2))
			got := l.search(want)
			exp, _ := slices.BinarySearchFunc(model, want, func(c jobChange, idx uint64) int {
				if c.index < idx {
					return -1
				}
				return 1
			})
			if got != exp {
				t.Fatalf("round %d: search(%d) = %d, want %d", round, want, got, exp)
			}
		}
		for _, ch := range l.chunks[:max(0, len(l.chunks)-1)] {
			if len(ch) != changeChunk {
				t.Fatalf("round %d: a chunk before the last holds %d entries", round, len(ch))
			}
		}
	}
}
