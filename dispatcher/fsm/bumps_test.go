package fsm_test

import (
	"testing"
)

// TestNodesChangedSinceAfterRestart: what changed before a load is not
// known, so a reader from before it is told to assume everything changed.
func TestNodesChangedSinceAfterRestart(t *testing.T) {
	dir := t.TempDir()
	r := openReplica(t, dir)
	for line, want := range map[string]string{"node n1 cpu=4000 mem=8Gi": "ok", "submit a count=1 cpu=1000 mem=1Gi": "j1"} {
		if got := r.exec(line); got != want {
			t.Fatalf("%s => %s, want %s", line, got, want)
		}
	}
	before := r.f.Applied()
	if got := r.exec("plan j1/g0@n1*1"); got != "placed=1" {
		t.Fatal(got)
	}
	if nodes, _, complete := r.f.NodesChangedSince(before); !complete || len(nodes) != 1 || nodes[0] != "n1" {
		t.Fatalf("before the restart: %v, complete %v", nodes, complete)
	}
	r.close()
	r2 := openReplica(t, dir)
	if _, _, complete := r2.f.NodesChangedSince(before); complete {
		t.Fatal("after a restart, changes from before it are reported complete")
	}
	if nodes, applied, complete := r2.f.NodesChangedSince(r2.f.Applied()); !complete || len(nodes) != 0 || applied != r2.f.CompleteIndex() {
		t.Fatalf("from the loaded index: %v, %d, complete %v", nodes, applied, complete)
	}
}
