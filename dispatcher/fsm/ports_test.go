package fsm

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// portSeq is a seq with node n1 of a port range of 10 ports.
func portSeq(t *testing.T) (*seq, time.Time) {
	q := newSeq(t)
	now := time.Unix(1_800_000_000, 0)
	c := api.Capacity{CPU: 64000, Memory: 64 << 30, Ports: 10}
	cmd, err := RegisterNode(now, api.NodeSpec{Name: "n1", Address: "10.0.0.7:7070", Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c},
		Ports: api.PortRange{Lo: 20000, Hi: 20009}})
	if err != nil {
		t.Fatal(err)
	}
	q.apply(cmd)
	return q, now
}

// portJob is a job of count tasks whose one container asks for ports.
func portJob(name string, count int64, ports ...api.Port) api.JobSpec {
	return api.JobSpec{Name: name, Tasks: []api.TaskGroupSpec{{Name: "g", Count: count, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
		Image: api.Image{Rootfs: "/r"}, Command: []string{"x"}, Resources: api.Resources{CPU: 100, Memory: 1 << 20, Ports: ports}}}}}}}
}

func (q *seq) submit(now time.Time, specs ...api.JobSpec) {
	q.t.Helper()
	for i := range specs {
		specs[i].SetDefaults()
	}
	cmd, err := SubmitJobs(now, specs)
	if err != nil {
		q.t.Fatal(err)
	}
	q.apply(cmd)
}

func (q *seq) plan(now time.Time, as ...Assignment) PlanResult {
	q.t.Helper()
	res, err := DecodePlanResult(q.apply(CommitPlan(&Plan{Term: 1, Index: q.index, Now: now, Assignments: as})))
	if err != nil {
		q.t.Fatal(err)
	}
	return res
}

func assign(job string, count int64) Assignment {
	return Assignment{Group: GroupKey{Job: job, Group: "g"}, Node: "n1", Count: count}
}

// targetPorts returns the ports of each pod of n1's target, by task ID.
func targetPorts(t *testing.T, f *FSM) map[string][]api.Port {
	_, pods, ok := f.NodeTarget("n1")
	if !ok {
		t.Fatal("no node n1")
	}
	m := map[string][]api.Port{}
	for _, p := range pods {
		m[p.TaskID] = p.Ports
	}
	return m
}

// TestPortsStaticConflictInOneRound: a plan that puts two pods asking for
// static port 8080 on one node, as two groups or two tasks of one, has
// the second refused (RejectPorts) and left pending; 8080/udp is another
// port.
func TestPortsStaticConflictInOneRound(t *testing.T) {
	q, now := portSeq(t)
	http := api.Port{Name: "http", Port: 8080}
	q.submit(now, portJob("a", 1, http), portJob("b", 1, http), portJob("c", 2, http), portJob("d", 1, api.Port{Name: "dns", Port: 8080, Protocol: "udp"}))
	res := q.plan(now, assign("j1", 1), assign("j2", 1), assign("j3", 2), assign("j4", 1))
	var codes []RejectCode
	for _, r := range res.Rejected {
		codes = append(codes, r.Code)
		if r.Code == RejectPorts && !strings.Contains(r.Detail, "8080/tcp in use on node n1") && !strings.Contains(r.Detail, "2 tasks with static ports") {
			t.Errorf("rejection %+v does not say why", r)
		}
	}
	if res.Placed != 2 || !slices.Equal(codes, []RejectCode{RejectPorts, RejectPorts}) {
		t.Fatalf("plan result %+v; want j1 and j4 placed, j2 and j3 refused for their ports", res)
	}
	got := targetPorts(t, q.f)
	if p := got["j1/0/0/1"]; len(p) != 1 || p[0] != (api.Port{Name: "http", Port: 8080, Protocol: "tcp"}) {
		t.Errorf("j1's pod has ports %+v", p)
	}
	if p := got["j4/0/0/1"]; len(p) != 1 || p[0] != (api.Port{Name: "dns", Port: 8080, Protocol: "udp"}) {
		t.Errorf("j4's pod has ports %+v", p)
	}
	q.f.ReadRound(func(r RoundRead) {
		if n := r.PendingGroupCount(); n != 2 {
			t.Errorf("%d pending groups; want j2's and j3's", n)
		}
		n, _ := r.Node("n1")
		if inUse := n.PortsInUse(); !slices.Equal(inUse, []api.PortKey{api.MakePortKey(8080, "tcp"), api.MakePortKey(8080, "udp")}) ||
			n.Spec().Ports != (api.PortRange{Lo: 20000, Hi: 20009}) || n.PortsFree() != 10 {
			t.Errorf("node n1: ports in use %v, range %v, %d free", inUse, n.Spec().Ports, n.PortsFree())
		}
	})
}

// TestPortsDynamicAssignedAndReleased: dynamic ports are the lowest free
// of the node's range for their protocol, kept with the task, shown in
// the target and the task listing, released when the task ends, and
// counted again by Load; a node with too few left refuses.
func TestPortsDynamicAssignedAndReleased(t *testing.T) {
	q, now := portSeq(t)
	q.submit(now, portJob("a", 6, api.Port{Name: "http"}, api.Port{Name: "dns", Protocol: "udp"}), portJob("s", 1, api.Port{Name: "admin", Port: 20004}))
	if res := q.plan(now, assign("j2", 1), assign("j1", 3)); res.Placed != 4 {
		t.Fatalf("plan: %+v", res)
	}
	got := targetPorts(t, q.f)
	for i, want := range []int32{20000, 20001, 20002} {
		id := taskID(taskKey{1, 0, uint32(i)}, 1)
		if w := []api.Port{{Name: "http", Port: want, Protocol: "tcp"}, {Name: "dns", Port: want, Protocol: "udp"}}; !slices.Equal(got[id], w) {
			t.Errorf("%s: ports %+v, want %+v", id, got[id], w)
		}
	}
	// 7 of the range's 10 are in use (3 tcp, 3 udp, 20004): one more
	// task needs 2.
	if res := q.plan(now, assign("j1", 2)); res.Placed != 0 || len(res.Rejected) != 1 || res.Rejected[0].Code != RejectPorts {
		t.Fatalf("plan beyond the range: %+v; want refused for its ports", res)
	}
	if res := q.plan(now, assign("j1", 1)); res.Placed != 1 {
		t.Fatalf("plan: %+v", res)
	}
	if p := targetPorts(t, q.f)["j1/0/3/1"]; len(p) != 2 || p[0].Port != 20003 || p[1].Port != 20003 {
		t.Errorf("task 3: ports %+v, want 20003 twice (20004/tcp is taken, not 20004/udp, but the range is counted whole)", p)
	}
	tasks, _ := q.f.JobTasks("j1", "", 0)
	if tk := tasks[1]; tk.Host != "10.0.0.7" || !slices.Equal(tk.Ports, []api.Port{{Name: "http", Port: 20001, Protocol: "tcp"}, {Name: "dns", Port: 20001, Protocol: "udp"}}) {
		t.Errorf("listing: task %+v; want host 10.0.0.7 and ports 20001", tk)
	}
	// Task 1 ends: its ports are free again, and the next task gets them.
	q.apply(UpdateTasks(now.Add(time.Second), []Report{{Node: "n1", TaskReport: &api.TaskReport{TaskID: "j1/0/1/1", State: api.TaskFailed, Reason: api.ReasonExited, ExitCode: 1, Time: now}}}))
	if p := targetPorts(t, q.f)["j1/0/1/1"]; p != nil {
		t.Errorf("an ended task is still in the target with %+v", p)
	}
	// A restart counts the ports of the active tasks again.
	q.s.store(q.f)
	q.s.commit()
	g := New()
	if err := g.Load(q.s); err != nil {
		t.Fatal(err)
	}
	if a, b := q.f.dump(), g.dump(); a != b {
		t.Fatalf("loaded state differs:\nlive:\n%s\nloaded:\n%s", a, b)
	}
	if res := q.plan(now.Add(time.Minute), assign("j1", 1)); res.Placed != 1 {
		t.Fatalf("plan: %+v", res)
	}
	// The retry (j1/0/1/2, due at once or not) or task 4 took 20001.
	var took []string
	for id, p := range targetPorts(t, q.f) {
		if len(p) == 2 && p[0].Port == 20001 {
			took = append(took, id)
		}
	}
	if len(took) != 1 {
		t.Errorf("after the release, pods with port 20001: %v; want one", took)
	}
}

// TestPortsNodeWithoutRange: a node that advertises no range takes no
// pod with ports, static or dynamic.
func TestPortsNodeWithoutRange(t *testing.T) {
	q := newSeq(t)
	now := time.Unix(1_800_000_000, 0)
	q.node(now, api.Capacity{CPU: 4000, Memory: 4 << 30, Ports: 10})
	q.submit(now, portJob("a", 1, api.Port{Name: "http", Port: 8080}), portJob("b", 1, api.Port{Name: "http"}), portJob("c", 1))
	res := q.plan(now, assign("j1", 1), assign("j2", 1), assign("j3", 1))
	if res.Placed != 1 || len(res.Rejected) != 2 || res.Rejected[0].Code != RejectPorts || !strings.Contains(res.Rejected[0].Detail, "no port range") {
		t.Fatalf("plan: %+v; want only the job without ports placed", res)
	}
}

// TestPortsCapTaskRefused: a capbox task may not ask for ports of its
// own.
func TestPortsCapTaskRefused(t *testing.T) {
	err := checkCapTaskPorts(&api.PodSpec{Containers: []api.ContainerSpec{{}, {Resources: api.Resources{Ports: []api.Port{{Name: "p"}}}}}})
	if !errors.Is(err, ErrNoRoom) || !strings.Contains(err.Error(), "ports") {
		t.Fatalf("got %v, want ErrNoRoom about ports", err)
	}
	if err := checkCapTaskPorts(&api.PodSpec{Containers: []api.ContainerSpec{{}}}); err != nil {
		t.Fatal(err)
	}
}

// oldLog is a log the release before wrote (task records of version 3,
// node specs without a port range): a node, a job of 3 tasks, a plan of
// 2 and a report; oldStore is the store it left.
var oldLog = []string{
	"\x02\a\x80\x80\xa0\xbb\u049d\xf1\xfa1\xd9\x01{\"name\":\"n1\",\"address\":\"10.0.0.7:7070\",\"capacity\":{\"cpu\":4000,\"memory\":4294967296,\"ports\":10},\"allocatable\":{\"online\":{\"cpu\":4000,\"memory\":4294967296,\"ports\":10},\"offline\":{\"cpu\":4000,\"memory\":4294967296,\"ports\":10}}}",
	"\x01\a\x80\x80\xa0\xbb\u049d\xf1\xfa1\x01\x00L\x03old\adefault\x00\x00\aoffline\x00\x00\x00\x00\x06\x80\xa8\u05b9\a\x80\u0e84\xbf\x03\x00\x00\x00\x01\x04work\x06\x00\x01\x02c0\x02/r\x00\x00\x01\x01x\x00\x00\x01/\xc8\x01\x80\x80\x80\x01\x00\x00\x00\x00\x00",
	"\x04\a\x80\x80\xa0\xbb\u049d\xf1\xfa1\x01\x02\x01\x02j1\x04work\x02n1\x04\x00",
	"\x05\a\x80\xa8\xf6\xf4\u065d\xf1\xfa1\x01\x03n1\bj1/0/0/1\x03\x01\x00\x00",
}

var oldStore = map[string]string{
	"J/\x00\x00\x00\x00\x00\x00\x00\x01": "\x03\x80\x80\xa0\xbb\u049d\xf1\xfa1\x01\x00L\x03old\adefault\x00\x00\aoffline\x00\x00\x00\x00\x06\x80\xa8\u05b9\a\x80\u0e84\xbf\x03\x00\x00\x00\x01\x04work\x06\x00\x01\x02c0\x02/r\x00\x00\x01\x01x\x00\x00\x01/\xc8\x01\x80\x80\x80\x01\x00\x00\x00\x00\x00",
	"N/n1":                               "\x00\x00\x00\x00\x00\x00\x00\x01",
	"g/\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00": "\x01\x02\x00\x00\x00\x00",
	"m/applied":  "\x00\x00\x00\x00\x00\x00\x00\x04",
	"m/planterm": "\x00\x00\x00\x00\x00\x00\x00\x01",
	"n/n1":       "\x02\x05ready\xd9\x01{\"name\":\"n1\",\"address\":\"10.0.0.7:7070\",\"capacity\":{\"cpu\":4000,\"memory\":4294967296,\"ports\":10},\"allocatable\":{\"online\":{\"cpu\":4000,\"memory\":4294967296,\"ports\":10},\"offline\":{\"cpu\":4000,\"memory\":4294967296,\"ports\":10}}}",
	"s/job":      "\x00\x00\x00\x00\x00\x00\x00\x02",
	"t/\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00": "\x03\x02\x01\x02n1\x01\x03\x00\x00\x00\astarted\x80\xa8\xf6\xf4\u065d\xf1\xfa1\x01\x01\x00\x00\x00\x00\xff\xa7\u05b9\a",
}

// TestPortsReadsTheReleaseBefore: a store and a log written by the
// release before load and replay to the same state, whose tasks hold no
// ports, and the state takes new commands.
func TestPortsReadsTheReleaseBefore(t *testing.T) {
	q := newSeq(t)
	for _, c := range oldLog {
		q.apply([]byte(c))
	}
	s := newMemStore()
	for k, v := range oldStore {
		s.m[k] = []byte(v)
	}
	g := New()
	if err := g.Load(s); err != nil {
		t.Fatalf("load the store of the release before: %v", err)
	}
	if a, b := q.f.dump(), g.dump(); a != b {
		t.Fatalf("replayed and loaded states differ:\nreplayed:\n%s\nloaded:\n%s", a, b)
	}
	if !strings.Contains(g.dump(), "task j1/0/0/1 running node=n1") || strings.Contains(g.dump(), "inRange") {
		t.Fatalf("loaded state:\n%s", g.dump())
	}
	// Its node has no host IP: the listing shows its address's host.
	tasks, _ := g.JobTasks("j1", "", 0)
	for _, tk := range tasks {
		if tk.Host != "10.0.0.7" {
			t.Errorf("listing of the loaded state: task %+v; want host 10.0.0.7", tk)
		}
	}
	if len(tasks) != 2 {
		t.Errorf("listing of the loaded state: %d tasks, want 2", len(tasks))
	}
	if res := q.plan(time.Unix(1_800_000_010, 0), Assignment{Group: GroupKey{Job: "j1", Group: "work"}, Node: "n1", Count: 1}); res.Placed != 1 {
		t.Fatalf("plan after the replay: %+v", res)
	}
}

// TestPortsListingHostIP: the task listing's host is the node's host IP
// when it registered one (its address may be loopback, a pod's own), else
// its address's host; a node that registers again with one shows it, and
// a reload keeps both.
func TestPortsListingHostIP(t *testing.T) {
	q, now := portSeq(t) // n1: 10.0.0.7:7070, no host IP
	c := api.Capacity{CPU: 64000, Memory: 64 << 30, Ports: 10}
	n2 := api.NodeSpec{Name: "n2", Address: "127.0.0.1:7071", HostIP: "192.0.2.10", Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c},
		Ports: api.PortRange{Lo: 20000, Hi: 20009}}
	cmd, err := RegisterNode(now, n2)
	if err != nil {
		t.Fatal(err)
	}
	q.apply(cmd)
	q.submit(now, portJob("a", 2, api.Port{Name: "http"}))
	a2 := assign("j1", 1)
	a2.Node = "n2"
	if res := q.plan(now, assign("j1", 1), a2); res.Placed != 2 {
		t.Fatalf("plan: %+v", res)
	}
	hosts := func(f *FSM) []string {
		tasks, _ := f.JobTasks("j1", "", 0)
		var h []string
		for _, tk := range tasks {
			h = append(h, tk.Node+"="+tk.Host)
		}
		return h
	}
	if got, want := hosts(q.f), []string{"n1=10.0.0.7", "n2=192.0.2.10"}; !slices.Equal(got, want) {
		t.Errorf("listing hosts %v, want %v", got, want)
	}
	q.s.store(q.f)
	q.s.commit()
	g := New()
	if err := g.Load(q.s); err != nil {
		t.Fatal(err)
	}
	if got, want := hosts(g), []string{"n1=10.0.0.7", "n2=192.0.2.10"}; !slices.Equal(got, want) {
		t.Errorf("after a reload, listing hosts %v, want %v", got, want)
	}
	n1 := api.NodeSpec{Name: "n1", Address: "10.0.0.7:7070", HostIP: "10.0.1.7", Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c},
		Ports: api.PortRange{Lo: 20000, Hi: 20009}}
	if cmd, err = RegisterNode(now, n1); err != nil {
		t.Fatal(err)
	}
	q.apply(cmd)
	if got, want := hosts(q.f), []string{"n1=10.0.1.7", "n2=192.0.2.10"}; !slices.Equal(got, want) {
		t.Errorf("after n1 registered a host IP, listing hosts %v, want %v", got, want)
	}
	// A loopback host IP is refused: no listing would show it.
	n1.HostIP = "127.0.0.1"
	if cmd, err = RegisterNode(now, n1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.s.apply(q.f, q.index+1, cmd); err == nil || !strings.Contains(err.Error(), "host_ip") {
		t.Errorf("register with a loopback host IP: %v, want refused for host_ip", err)
	}
}

// TestTaskRecordPortsRefused: a task record whose task holds port 0 is
// corrupt; one without ports spends no byte on them.
func TestTaskRecordPortsRefused(t *testing.T) {
	k := taskKey{job: 1}
	bad := encodeTasks(nil, []*task{{key: k, attempt: 1, state: api.TaskRunning, node: "n1", ports: []uint16{20000, 0}}})
	if _, err := decodeTasks(k, bad); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "port 0") {
		t.Errorf("decode a task holding port 0: %v; want ErrCorrupt", err)
	}
	with := encodeTasks(nil, []*task{{key: k, attempt: 1, state: api.TaskRunning, node: "n1", ports: []uint16{20000}}})
	without := encodeTasks(nil, []*task{{key: k, attempt: 1, state: api.TaskRunning, node: "n1"}})
	if len(with) != len(without)+4 { // a count byte and a 3-byte varint
		t.Errorf("a task with one port takes %d bytes more than one without; want 4", len(with)-len(without))
	}
}
