package fsm

import (
	"testing"

	"github.com/sluicehq/sluice/api"
)

// TestNodeRecordVersions: a node record keeps the drain; one of the
// version before reads as drained, without a deadline, when draining.
func TestNodeRecordVersions(t *testing.T) {
	spec := []byte(`{"name":"n1","capacity":{"cpu":1000,"memory":1024},"allocatable":{"online":{"cpu":1000,"memory":1024},"offline":{"cpu":1000,"memory":1024}}}`)
	n := &node{state: api.NodeDown, drain: true, drainDeadline: 1_800_000_000_123, specJSON: spec}
	got, err := decodeNode(encodeNode(n))
	if err != nil || got.state != api.NodeDown || !got.drain || got.drainDeadline != n.drainDeadline || got.spec.Name != "n1" {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	for _, c := range []struct {
		state api.NodeState
		drain bool
	}{{api.NodeReady, false}, {api.NodeDraining, true}, {api.NodeDown, false}} {
		e := enc{}
		e.byte(nodeRecordVersion - 1)
		e.str(string(c.state))
		e.bytes(spec)
		got, err := decodeNode(e.b)
		if err != nil || got.state != c.state || got.drain != c.drain || got.drainDeadline != 0 {
			t.Errorf("version %d record, %s: decoded %s drain=%v/%d, %v", nodeRecordVersion-1, c.state, got.state, got.drain, got.drainDeadline, err)
		}
	}
	e := enc{}
	e.byte(nodeRecordVersion + 1)
	if _, err := decodeNode(e.b); err == nil {
		t.Error("a record of a version to come decoded")
	}
	if _, err := decodeNode(encodeNode(n)[:len(encodeNode(n))-1]); err == nil {
		t.Error("a truncated record decoded")
	}
}
