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
		for range r.IntN(4 * pageLen) {
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
		// Packed: the pages the entries need and no more, and nothing past
		// the last entry kept alive.
		if pages := l.entries.pages; len(pages) != (l.len()+pageLen-1)/pageLen {
			t.Fatalf("round %d: %d pages for %d entries", round, len(pages), l.len())
		} else if len(pages) > 0 {
			for _, c := range pages[len(pages)-1][(l.len()-1)%pageLen+1:] {
				if c != (jobChange{}) {
					t.Fatalf("round %d: an entry past the last is kept: %+v", round, c)
				}
			}
		}
	}
}

// TestPendingSetAgreesWithAMap adds and removes random groups, across page
// boundaries, and checks the set against a map kept the simple way: the
// same groups, each knowing its place, and the pages no more than needed.
func TestPendingSetAgreesWithAMap(t *testing.T) {
	r := seedtest.Rand(t)
	groups := make([]group, 3*pageLen)
	var (
		s     pendingSet
		model = map[*group]bool{}
	)
	for step := range 40 * pageLen {
		g := &groups[r.IntN(len(groups))]
		// Phases of mostly adding and of mostly removing move the size
		// over page boundaries both ways.
		if (step/(4*pageLen))%2 == 0 == (r.IntN(4) != 0) {
			s.add(g)
			model[g] = true
		} else {
			s.remove(g)
			delete(model, g)
		}
	}
	all := slices.Collect(s.gs.all())
	if len(all) != len(model) || s.gs.len() != len(model) {
		t.Fatalf("%d groups (len %d), want %d", len(all), s.gs.len(), len(model))
	}
	for i, g := range all {
		if !model[g] || g.pendingAt != i+1 {
			t.Fatalf("entry %d: in the model %v, place %d", i, model[g], g.pendingAt)
		}
	}
	if pages := len(s.gs.pages); pages != (len(all)+pageLen-1)/pageLen {
		t.Fatalf("%d pages for %d groups", pages, len(all))
	}
}
