package fsm_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/raftkv"
)

// recorder keeps the change sets a subscriber was given, as text.
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *recorder) record(c *fsm.Changes) {
	var b strings.Builder
	switch c.Kind {
	case fsm.ChangeReset:
		fmt.Fprintf(&b, "reset@%d", c.Index)
	case fsm.ChangeComplete:
		fmt.Fprintf(&b, "complete@%d", c.Index)
	case fsm.ChangeApplied:
		fmt.Fprintf(&b, "applied jobs=%v boxes=%v forgotten=%v groups=%v tasks=%v targets=%v",
			c.Jobs, c.Capboxes, c.Forgotten, c.Groups, c.Tasks, c.Targets)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, b.String())
}

// take returns the change sets of commands recorded since the last take,
// leaving out completions.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.seen {
		if !strings.HasPrefix(s, "complete@") {
			out = append(out, s)
		}
	}
	r.seen = nil
	return out
}

// TestSubscribeChanges: a subscriber starts with a reset at the applied
// index and then gets one change set per command that applied, naming
// what it changed, and none for a command refused.
func TestSubscribeChanges(t *testing.T) {
	r := openReplica(t, t.TempDir())
	var rec recorder
	unsubscribe := r.f.Subscribe(rec.record)
	if got, want := rec.take(), []string{fmt.Sprintf("reset@%d", r.f.Applied())}; !slices.Equal(got, want) {
		t.Fatalf("first change sets %q, want %q", got, want)
	}
	steps := []struct{ line, out, changes string }{
		{"node n1 cpu=4000 mem=8Gi", "ok", "applied jobs=[] boxes=[] forgotten=[] groups=[] tasks=[] targets=[]"},
		{"submit a count=1 cpu=1000 mem=1Gi", "j1", "applied jobs=[1] boxes=[] forgotten=[] groups=[{1 0}] tasks=[] targets=[]"},
		{"plan j1/g0@n1*2", "placed=0", "applied jobs=[] boxes=[] forgotten=[] groups=[] tasks=[] targets=[]"},
		{"plan j1/g0@n1*1", "placed=1", "applied jobs=[1] boxes=[] forgotten=[] groups=[{1 0}] tasks=[{1 0 0}] targets=[n1]"},
		{"report n1 j1/0/0/1 running", "applied=1", "applied jobs=[] boxes=[] forgotten=[] groups=[] tasks=[{1 0 0}] targets=[]"},
		{"report n1 j9/0/0/1 running", "error", ""},
		{"cancel j1", "dropped=0 stopping=1", "applied jobs=[1] boxes=[] forgotten=[] groups=[{1 0}] tasks=[{1 0 0}] targets=[n1]"},
		{"report n1 j1/0/0/1 killed", "applied=1", "applied jobs=[1] boxes=[] forgotten=[] groups=[{1 0}] tasks=[{1 0 0}] targets=[]"},
		{"forget j1", "forgotten=1 kept=0", "applied jobs=[] boxes=[] forgotten=[1] groups=[] tasks=[] targets=[]"},
	}
	for _, s := range steps {
		got := r.exec(s.line)
		if !strings.HasPrefix(got, s.out) {
			t.Fatalf("%s => %s, want %s", s.line, got, s.out)
		}
		var want []string
		if s.changes != "" {
			want = []string{s.changes}
		}
		if cs := rec.take(); !slices.Equal(cs, want) {
			t.Fatalf("%s: change sets\n%q\nwant\n%q", s.line, cs, want)
		}
	}
	unsubscribe()
	r.exec("node n2 cpu=4000 mem=8Gi")
	if cs := rec.take(); len(cs) != 0 {
		t.Fatalf("after unsubscribing: %q", cs)
	}
}

// TestSubscribeCompletions: completions come in index order, after the
// change sets of their entries.
func TestSubscribeCompletions(t *testing.T) {
	r := openReplica(t, t.TempDir())
	var mu sync.Mutex
	var last, lastApplied uint64
	var bad []string
	r.f.Subscribe(func(c *fsm.Changes) {
		mu.Lock()
		defer mu.Unlock()
		switch c.Kind {
		case fsm.ChangeComplete:
			if c.Index < last || c.Index < lastApplied {
				bad = append(bad, fmt.Sprintf("completion %d after %d, applied %d", c.Index, last, lastApplied))
			}
			last = c.Index
		case fsm.ChangeApplied:
			if c.Index <= last {
				bad = append(bad, fmt.Sprintf("command at %d after completion %d", c.Index, last))
			}
			lastApplied = c.Index
		}
	})
	for i := range 5 {
		r.exec(fmt.Sprintf("node n%d cpu=4000 mem=8Gi", i))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatal(bad)
	}
	if last < lastApplied || lastApplied == 0 {
		t.Fatalf("last completion %d, last command %d", last, lastApplied)
	}
}

// emptyStore is a keyspace with nothing in it.
type emptyStore struct{}

func (emptyStore) Get([]byte) ([]byte, error) { return nil, raftkv.ErrNotFound }
func (emptyStore) Scan(_, _ []byte, _ func(k, v []byte) error) error {
	return nil
}

// TestLoadResetsSubscribers: a Load (a snapshot restore) tells every
// subscriber to start afresh.
func TestLoadResetsSubscribers(t *testing.T) {
	f := fsm.New()
	var rec recorder
	f.Subscribe(rec.record)
	if err := f.Load(emptyStore{}); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.take(), []string{"reset@0", "reset@0"}; !slices.Equal(got, want) {
		t.Fatalf("change sets %q, want %q", got, want)
	}
}

// TestChangesNameRoundInputNodes: a node's registration changes which
// nodes are ready (NodeSet) and names it; a plan names the nodes whose
// resources it took.
func TestChangesNameRoundInputNodes(t *testing.T) {
	r := openReplica(t, t.TempDir())
	var mu sync.Mutex
	var got []string
	r.f.Subscribe(func(c *fsm.Changes) {
		if c.Kind != fsm.ChangeApplied {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, fmt.Sprintf("nodes=%v set=%v", c.Nodes, c.NodeSet))
	})
	for _, line := range []string{"node n1 cpu=4000 mem=8Gi", "node n2 cpu=4000 mem=8Gi", "submit a count=1 cpu=1000 mem=1Gi", "plan j1/g0@n2*1", "state n1 draining"} {
		r.exec(line)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"nodes=[n1] set=true", "nodes=[n2] set=true", "nodes=[] set=false", "nodes=[n2] set=false", "nodes=[] set=true"}
	if !slices.Equal(got, want) {
		t.Fatalf("change sets\n%q\nwant\n%q", got, want)
	}
}
