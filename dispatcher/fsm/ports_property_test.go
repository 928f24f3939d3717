package fsm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// runPortsProperty places random jobs with static and dynamic ports on
// random nodes, round after round, through the placer and the plan
// applier, ending tasks at random and now and then restarting from the
// store. After every round: no node has a port twice, every port is in
// 1..65535, dynamic ports are in their node's range, no task is active on
// two nodes, no node is over capacity, and the ports each node counts in
// use are those its active tasks hold.
func runPortsProperty(t *testing.T, v roundView) {
	r := seedtest.Rand(t) // logs its seed
	var withPorts int
	for run := range 4 {
		portsPropertyRun(t, v, r, run, &withPorts)
	}
	// Counted once a round for every round they stay: not a count of
	// tasks, but it must not be 0.
	t.Logf("pods with ports seen in targets: %d", withPorts)
	if withPorts == 0 {
		t.Fatal("no pod with ports was ever placed")
	}
}

func portsPropertyRun(t *testing.T, v roundView, r *rand.Rand, run int, withPorts *int) {
	q := newSeq(t)
	now := time.Unix(1_800_000_000, 0)
	nodes := 2 + r.IntN(5)
	for i := range nodes {
		c := api.Capacity{CPU: 1000 * (2 + r.Int64N(8)), Memory: 8 << 30}
		spec := api.NodeSpec{Name: fmt.Sprintf("n%d", i), Address: fmt.Sprintf("10.0.0.%d:7070", i+1)}
		if r.IntN(4) > 0 { // some nodes advertise no range
			lo := uint16(8000 + r.IntN(100))
			spec.Ports = api.PortRange{Lo: lo, Hi: lo + uint16(r.IntN(12))}
			c.Ports = spec.Ports.Size()
		}
		spec.Capacity, spec.Allocatable = c, api.Allocatable{Online: c, Offline: c}
		cmd, err := RegisterNode(now, spec)
		if err != nil {
			t.Fatal(err)
		}
		q.apply(cmd)
	}
	// Static ports come from a few numbers, some inside the ranges.
	statics := []api.Port{{Port: 8080}, {Port: 8081}, {Port: 8005}, {Port: 53, Protocol: "udp"}, {Port: 8080, Protocol: "udp"}}
	p := placement.New(nil)
	for round := range 40 {
		now = now.Add(time.Second)
		var specs []api.JobSpec
		for range r.IntN(3) {
			var ports []api.Port
			for k := range r.IntN(4) {
				pt := api.Port{Name: fmt.Sprintf("p%d", k)}
				if r.IntN(2) == 0 {
					s := statics[r.IntN(len(statics))]
					if slices.ContainsFunc(ports, func(o api.Port) bool { return o.Port == s.Port && o.Protocol == s.Protocol }) {
						continue
					}
					pt.Port, pt.Protocol = s.Port, s.Protocol
				} else if r.IntN(3) == 0 {
					pt.Protocol = "udp"
				}
				ports = append(ports, pt)
			}
			specs = append(specs, portJob(fmt.Sprintf("r%d", round), 1+r.Int64N(6), ports...))
		}
		if len(specs) > 0 {
			q.submit(now, specs...)
		}
		in := v.Build(q.f, now)
		plan, err := p.Place(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		as := make([]Assignment, len(plan.Assignments))
		for i, a := range plan.Assignments {
			as[i] = Assignment{Group: GroupKey(a.Group), Node: a.Node, Count: a.Count, Slots: a.Slots}
		}
		q.apply(CommitPlan(&Plan{Term: 1, Index: q.index, Now: now, Assignments: as}))
		// End some active tasks.
		var reps []Report
		for i := range nodes {
			name := fmt.Sprintf("n%d", i)
			_, pods, _ := q.f.NodeTarget(name)
			for _, pod := range pods {
				if len(pod.Ports) > 0 && pod.Ports[0].Port != 0 {
					*withPorts++
				}
				if r.IntN(3) == 0 {
					reps = append(reps, Report{Node: name, TaskReport: &api.TaskReport{TaskID: pod.TaskID, State: api.TaskRunning, Reason: api.ReasonStarted, Time: now}},
						Report{Node: name, TaskReport: &api.TaskReport{TaskID: pod.TaskID, State: api.TaskSucceeded, Reason: api.ReasonExited, Time: now}})
				}
			}
		}
		if len(reps) > 0 {
			q.apply(UpdateTasks(now, reps))
		}
		if r.IntN(8) == 0 {
			q.s.store(q.f)
			q.s.commit()
			g := New()
			if err := g.Load(q.s); err != nil {
				t.Fatal(err)
			}
			if a, b := q.f.dump(), g.dump(); a != b {
				t.Fatalf("run %d round %d: loaded state differs:\nlive:\n%s\nloaded:\n%s", run, round, a, b)
			}
			q.f = g
		}
		if err := checkPorts(q.f); err != nil {
			t.Fatalf("run %d round %d: %v", run, round, err)
		}
	}
}

// checkPorts checks the port invariants of f's state.
func checkPorts(f *FSM) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	onNode := map[taskKey]string{}
	for _, n := range f.mu.nodeList {
		held := map[api.PortKey]bool{}
		var inRange int64
		for _, t := range n.tasks {
			if prev, dup := onNode[t.key]; dup {
				return fmt.Errorf("task %v active on %s and %s", t.key, prev, n.spec.Name)
			}
			onNode[t.key] = n.spec.Name
			g := f.mu.jobs.get(t.key.job).groups[t.key.group]
			if len(t.ports) != len(g.ports) {
				return fmt.Errorf("task %v holds %d ports, its pod has %d", t.key, len(t.ports), len(g.ports))
			}
			for i, num := range t.ports {
				k := api.MakePortKey(int32(num), g.ports[i].Protocol())
				switch {
				case num == 0:
					return fmt.Errorf("task %v: port 0", t.key)
				case held[k]:
					return fmt.Errorf("node %s: port %s twice", n.spec.Name, k)
				case g.ports[i].Port() == 0 && !n.spec.Ports.Contains(int32(num)):
					return fmt.Errorf("node %s: dynamic port %s outside its range %s", n.spec.Name, k, n.spec.Ports)
				case g.ports[i].Port() != 0 && g.ports[i].Port() != int32(num):
					return fmt.Errorf("task %v: static port %s numbered %d", t.key, g.ports[i], num)
				}
				held[k] = true
				if n.spec.Ports.Contains(int32(num)) {
					inRange++
				}
			}
		}
		if inRange > n.spec.Ports.Size() {
			return fmt.Errorf("node %s: %d ports in a range of %d", n.spec.Name, inRange, n.spec.Ports.Size())
		}
		var counted []api.PortKey
		for k := range held {
			counted = append(counted, k)
		}
		slices.Sort(counted)
		if got := n.portsInUse(); !slices.Equal(got, counted) || (n.ports != nil && n.ports.inRange != inRange) {
			return fmt.Errorf("node %s counts %v in use, its tasks hold %v (%d in range)", n.spec.Name, got, counted, inRange)
		}
		if n.ports != nil {
			for _, proto := range []string{api.ProtocolTCP, api.ProtocolUDP} {
				k := api.MakePortKey(0, proto)
				for p := int32(n.spec.Ports.Lo); p < n.ports.low[lowIndex(k)] && p <= int32(n.spec.Ports.Hi); p++ {
					if !held[api.MakePortKey(p, proto)] {
						return fmt.Errorf("node %s: port %d/%s is free, below where the search for a free one starts", n.spec.Name, p, proto)
					}
				}
			}
		}
		for _, c := range []api.Capacity{n.free(api.QoSOnline), n.free(api.QoSOffline)} {
			if c.CPU < 0 || c.Memory < 0 || c.Ports < 0 {
				return fmt.Errorf("node %s over capacity: free %+v", n.spec.Name, c)
			}
		}
	}
	return nil
}
