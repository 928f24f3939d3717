package fsm

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/seedtest"
)

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
