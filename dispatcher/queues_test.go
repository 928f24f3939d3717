package dispatcher_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/placement"
)

// TestWeigh: a queue's replicated weight wins over its configured one; a
// queue without one takes the configured weight, and a configured queue
// the round does not list is added.
func TestWeigh(t *testing.T) {
	in := &placement.Input{Queues: []placement.Queue{{Name: "a", Weight: 4}, {Name: "b"}}}
	dispatcher.Weigh(map[string]int64{"a": 2, "b": 3, "c": 5}, in)
	if got, want := fmt.Sprint(in.Queues), "[{a 4 {0 0 0 0 0} 0 {0 0 0 0}} {b 3 {0 0 0 0 0} 0 {0 0 0 0}} {c 5 {0 0 0 0 0} 0 {0 0 0 0}}]"; got != want {
		t.Fatalf("queues %s, want %s", got, want)
	}
}
