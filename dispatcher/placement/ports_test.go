package placement_test

import (
	"testing"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
)

// portNode returns a node with a port range of size free ports free.
func portNode(id string, free int64, inUse ...api.PortKey) placement.Node {
	n := node(id, 8000, 32)
	n.PortRange = api.PortRange{Lo: 20000, Hi: 20099}
	n.Capacity.Online.Ports, n.Capacity.Offline.Ports = 100, 100
	n.Free.Online.Ports, n.Free.Offline.Ports = free, free
	n.PortsInUse = inUse
	return n
}

func portGroup(job string, pending, dynamic int64, static ...api.PortKey) placement.Group {
	g := group(job, pending, 100, 1)
	g.Demand.Ports = dynamic
	g.StaticPorts = static
	return g
}

// TestPortFilter: a task with ports goes only to nodes with a port range,
// its static ports free there and room in the range for its dynamic ones;
// the nodes ruled out are counted under the ports filter in why pending.
func TestPortFilter(t *testing.T) {
	http := api.MakePortKey(8080, "tcp")
	dns := api.MakePortKey(8080, "udp")
	in := placement.Input{
		Nodes: []placement.Node{
			node("bare", 8000, 32),            // no range: no ports at all
			portNode("taken", 100, http),      // 8080/tcp in use
			portNode("udp-only", 100, dns),    // 8080/udp in use: tcp is free
			portNode("full", 0),               // no dynamic port left
			portNode("roomy", 100),            //
			portNode("roomy-too", 100, dns+1), //
		},
		Groups: []placement.Group{
			portGroup("static", 5, 0, http),
			portGroup("dynamic", 4, 2),
			group("none", 1, 100, 1),
		},
	}
	plan := place(t, &in)
	on := placedOn(plan)
	if on["static@bare"]+on["static@taken"] > 0 || on["dynamic@bare"]+on["dynamic@full"] > 0 {
		t.Fatalf("placed on a node without the ports: %v", on)
	}
	for _, id := range []string{"udp-only", "full", "roomy", "roomy-too"} {
		if on["static@"+id] > 1 {
			t.Fatalf("two tasks with static port 8080/tcp on %s: %v", id, on)
		}
	}
	if got := on["static@udp-only"] + on["static@full"] + on["static@roomy"] + on["static@roomy-too"]; got != 4 {
		t.Errorf("static: %d placed, want one on each of the 4 nodes where 8080/tcp is free: %v", got, on)
	}
	if on["dynamic@udp-only"]+on["dynamic@roomy"]+on["dynamic@roomy-too"]+on["dynamic@taken"] != 4 {
		t.Errorf("dynamic: want all 4 placed on nodes with room in their range: %v", on)
	}
	if on["none@bare"]+on["none@taken"]+on["none@udp-only"]+on["none@full"]+on["none@roomy"]+on["none@roomy-too"] != 1 {
		t.Errorf("a task without ports was not placed: %v", on)
	}
	var static placement.Pending
	for _, p := range plan.Pending {
		if p.Group.Job == "static" {
			static = p
		}
	}
	if static.Count != 1 || static.Rejected[api.FilterPorts] != 2 {
		t.Errorf("static pending %+v: want 1 task, with the ports filter charged for 2 nodes (bare, taken)", static)
	}
}

// TestPortsOneRound: two groups that want the same static port, placed in
// one round, never share a node; nor do two tasks of one group.
func TestPortsOneRound(t *testing.T) {
	http := api.MakePortKey(8080, "tcp")
	in := placement.Input{
		Nodes:  []placement.Node{portNode("n1", 100), portNode("n2", 100), portNode("n3", 100)},
		Groups: []placement.Group{portGroup("a", 3, 0, http), portGroup("b", 3, 1, http)},
	}
	// Different demands make different classes, judged apart.
	plan := place(t, &in)
	byNode := map[string]int64{}
	for _, a := range plan.Assignments {
		byNode[a.Node] += a.Count
	}
	for id, k := range byNode {
		if k > 1 {
			t.Fatalf("%d tasks with static port 8080 on %s: %+v", k, id, plan.Assignments)
		}
	}
	if plan.Stats.Placed != 3 || plan.Stats.Pending != 3 {
		t.Errorf("placed %d, pending %d; want 3 and 3", plan.Stats.Placed, plan.Stats.Pending)
	}
}

// TestPortFilterAlwaysOn: a policy that lists only other filters still
// has its static ports checked.
func TestPortFilterAlwaysOn(t *testing.T) {
	http := api.MakePortKey(8080, "tcp")
	g := portGroup("a", 2, 0, http)
	g.Policy = &api.Policy{Filters: []string{api.FilterLabels}}
	in := placement.Input{Nodes: []placement.Node{portNode("n1", 100, http), portNode("n2", 100)}, Groups: []placement.Group{g}}
	plan := place(t, &in)
	if on := placedOn(plan); on["a@n1"] != 0 || on["a@n2"] != 1 {
		t.Errorf("placed %v; want one task on n2 only", on)
	}
}
