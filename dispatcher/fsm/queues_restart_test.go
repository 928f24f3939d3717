package fsm_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/roundinput"
)

// TestQueuesRestart sets queues' settings through raftkv on pebble, clears
// one, and restarts the replica: Load brings back exactly the settings
// Apply kept, and the round input's caps with them.
func TestQueuesRestart(t *testing.T) {
	dir := t.TempDir()
	r := openReplica(t, dir)
	for _, q := range []struct {
		name string
		s    api.QueueSettings
	}{
		{"batch", api.QueueSettings{Weight: 4, Caps: api.QueueCaps{CPU: 64000, Memory: 256 << 30, GPUs: 8, Tasks: 1000}}},
		{"gone", api.QueueSettings{Caps: api.QueueCaps{Tasks: 1}}},
		{"web", api.QueueSettings{Caps: api.QueueCaps{Memory: 1 << 30}}},
		{"gone", api.QueueSettings{}},
	} {
		cmd, err := fsm.SetQueue(r.now, q.name, q.s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.propose(cmd); err != nil {
			t.Fatalf("set %s: %v", q.name, err)
		}
	}
	want := "[{batch {4 {64000 274877906944 8 1000}} 0 {0 0 0 0 0} 0 0} {web {0 {0 1073741824 0 0}} 0 {0 0 0 0 0} 0 0}]"
	if got := fmt.Sprint(r.f.Queues()); got != want {
		t.Fatalf("Queues() = %s\nwant        %s", got, want)
	}
	before := fsm.Dump(r.f)
	r.close()
	r2 := openReplica(t, dir)
	if after := fsm.Dump(r2.f); after != before {
		t.Fatalf("state after restart differs:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := fmt.Sprint(r2.f.Queues()); got != want {
		t.Fatalf("Queues() after restart = %s\nwant                      %s", got, want)
	}
	if got := fmt.Sprint(roundinput.Build(r2.f, r2.now, 0).Queues); got != "[{batch 4 {0 0 0 0 0} 0 {64000 274877906944 8 1000}} {web 0 {0 0 0 0 0} 0 {0 1073741824 0 0}}]" {
		t.Fatalf("round input queues after restart: %s", got)
	}
}
