package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/internal/seedtest"
	"github.com/sluicehq/sluice/raftkv"
)

// journalReplica is one raft replica (pebble on disk) whose FSM's change
// sets go to consume; the test proposes the commands.
type journalReplica struct {
	t   testing.TB
	kv  *raftkv.Node
	f   *fsm.FSM
	now time.Time
	r   *rand.Rand
	// nodes and jobs are the names registered and the IDs submitted;
	// ended holds the task IDs reported ended, which their nodes know
	// without being told.
	nodes []string
	jobs  []string
	ended map[string]bool

	mu sync.Mutex
	// complete is the last completion published; completed is closed and
	// replaced at each.
	complete  uint64
	completed chan struct{}
}

func openJournalReplica(t testing.TB, r *rand.Rand, consume func(*fsm.Changes)) *journalReplica {
	t.Helper()
	j := &journalReplica{t: t, f: fsm.New(), now: time.Unix(1_800_000_000, 0), r: r, ended: map[string]bool{}, completed: make(chan struct{})}
	t.Cleanup(j.f.Subscribe(func(c *fsm.Changes) {
		consume(c)
		if c.Kind == fsm.ChangeComplete {
			j.mu.Lock()
			defer j.mu.Unlock()
			j.complete = c.Index
			close(j.completed)
			j.completed = make(chan struct{})
		}
	}))
	kv, err := raftkv.Open(raftkv.Config{
		ID: 1, Dir: filepath.Join(t.TempDir(), "r1"), Peers: map[uint64]string{1: ""}, StateMachine: j.f,
		TickInterval: 5 * time.Millisecond, ElectionTicks: 4, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	j.kv = kv
	t.Cleanup(func() {
		if err := kv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	deadline := time.After(10 * time.Second)
	for {
		changed := kv.LeadershipChanged() // before Status, so that no change is missed
		if kv.Status().IsLeader {
			return j
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("no leader within 10s")
		}
	}
}

// propose proposes cmd and waits until its entry is complete: every
// change set up to it published. It returns the FSM's refusal, if any.
func (j *journalReplica) propose(cmd []byte) ([]byte, error) {
	j.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := j.kv.Propose(ctx, cmd)
	if ctx.Err() != nil {
		j.t.Fatalf("propose: %v", err)
	}
	applied := j.f.Applied()
	for {
		j.mu.Lock()
		done, ch := j.complete >= applied, j.completed
		j.mu.Unlock()
		if done {
			return res, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			j.t.Fatalf("entry %d not complete within 10s", applied)
		}
	}
}

// register registers n nodes of cpu millicores each.
func (j *journalReplica) register(n int, cpu int64) {
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		c := api.Capacity{CPU: cpu, Memory: cpu << 20, Disk: 1 << 40, Ports: 1000}
		cmd, err := fsm.RegisterNode(j.now, api.NodeSpec{Name: name, Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c}})
		if err != nil {
			j.t.Fatal(err)
		}
		if _, err := j.propose(cmd); err != nil {
			j.t.Fatalf("register %s: %v", name, err)
		}
		j.nodes = append(j.nodes, name)
	}
}

// step proposes one random command: a submit, a plan, reports of the pods
// of a node's target, or a cancel.
func (j *journalReplica) step() string {
	r := j.r
	j.now = j.now.Add(time.Duration(r.IntN(50)) * time.Millisecond)
	switch k := r.IntN(10); {
	case k == 0 || len(j.jobs) == 0:
		spec := api.JobSpec{
			Name:  fmt.Sprintf("job-%d", len(j.jobs)),
			Retry: api.RetryPolicy{MaxAttempts: 3},
			Tasks: []api.TaskGroupSpec{{Count: 1 + r.Int64N(8), Pod: api.PodSpec{Containers: []api.ContainerSpec{{
				Image: api.Image{Rootfs: "/rootfs"}, Command: []string{"/bin/true"},
				Resources: api.Resources{CPU: 100, Memory: 100 << 20}}}}}},
		}
		cmd, err := fsm.SubmitJobs(j.now, []api.JobSpec{spec})
		if err != nil {
			j.t.Fatal(err)
		}
		res, err := j.propose(cmd)
		if err != nil {
			j.t.Fatalf("submit: %v", err)
		}
		sr, err := fsm.DecodeSubmitResult(res)
		if err != nil {
			j.t.Fatal(err)
		}
		j.jobs = append(j.jobs, sr.Jobs[0].ID)
		return "submit"
	case k <= 4:
		p := &fsm.Plan{Term: 1, Now: j.now}
		for range 1 + r.IntN(3) {
			p.Assignments = append(p.Assignments, fsm.Assignment{
				Group: fsm.GroupKey{Job: j.jobs[r.IntN(len(j.jobs))], Group: "g0"},
				Node:  j.nodes[r.IntN(len(j.nodes))], Count: 1 + r.Int64N(3),
			})
		}
		_, err := j.propose(fsm.CommitPlan(p))
		return fmt.Sprintf("plan (%v)", err)
	case k <= 8:
		node := j.nodes[r.IntN(len(j.nodes))]
		_, pods, _ := j.f.NodeTarget(node)
		var reps []fsm.Report
		var ended []string
		for _, p := range pods {
			ti, ok := j.f.Task(p.TaskID)
			if !ok || r.IntN(2) == 0 {
				continue
			}
			st := api.TaskRunning
			switch ti.State {
			case api.TaskRunning:
				st = []api.TaskState{api.TaskSucceeded, api.TaskFailed}[r.IntN(2)]
				ended = append(ended, p.TaskID)
			case api.TaskAssigned:
				st = api.TaskStarting
			}
			reps = append(reps, fsm.Report{Node: node, TaskReport: &api.TaskReport{TaskID: p.TaskID, State: st, Time: j.now}})
		}
		_, err := j.propose(fsm.UpdateTasks(j.now, reps))
		if err == nil {
			for _, id := range ended {
				j.ended[id] = true
			}
		}
		return fmt.Sprintf("%d reports of %s (%v)", len(reps), node, err)
	default:
		_, err := j.propose(fsm.CancelJob(j.now, j.jobs[r.IntN(len(j.jobs))]))
		return fmt.Sprintf("cancel (%v)", err)
	}
}

// simNode is a node as the long-poll answers leave it: the target it
// holds and its generation, and the targets it held before.
type simNode struct {
	gen  uint64
	pods map[string]api.TargetPod
	held map[uint64]map[string]api.TargetPod
}

// applyTarget returns pods with the answer t applied, as nodelet's owner
// applies it: a whole target replaces, changes add (or replace) and
// remove.
func applyTarget(pods map[string]api.TargetPod, t Target) map[string]api.TargetPod {
	got := map[string]api.TargetPod{}
	if t.Base != 0 {
		maps.Copy(got, pods)
		for _, id := range t.Removed {
			delete(got, id)
		}
	}
	for _, p := range t.Pods {
		got[p.TaskID] = p
	}
	return got
}

// whole returns the FSM's target of node by task ID, and its generation.
func (j *journalReplica) whole(node string) (uint64, map[string]api.TargetPod) {
	gen, pods, ok := j.f.NodeTarget(node)
	if !ok {
		j.t.Fatalf("node %s unknown", node)
	}
	m := map[string]api.TargetPod{}
	for _, p := range pods {
		m[p.TaskID] = p
	}
	return gen, m
}

// known returns pods less those the node reported ended: what it knows it
// should run.
func (j *journalReplica) known(pods map[string]api.TargetPod) map[string]api.TargetPod {
	m := maps.Clone(pods)
	maps.DeleteFunc(m, func(id string, _ api.TargetPod) bool { return j.ended[id] })
	return m
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestTargetJournalRandom applies seeded random commands through raft
// and, after each completion (every view caught up), checks that a node
// holding any of its recent targets, given since's answer, holds exactly
// the FSM's whole target; or, told to wait, holds its generation and,
// but for the pods it reported ended, its pods. Journals are cut short,
// to check the answers across a trim.
func TestTargetJournalRandom(t *testing.T) {
	defer func(n int) { minJournal = n }(minJournal)
	minJournal = 2
	r := seedtest.Rand(t)
	steps := 300
	if testing.Short() {
		steps = 120
	}
	v := newTargetJournal(nil)
	j := openJournalReplica(t, r, v.consume)
	v.src = j.f
	j.register(4, 1500)
	nodes := map[string]*simNode{}
	for _, name := range j.nodes {
		nodes[name] = &simNode{held: map[uint64]map[string]api.TargetPod{}}
	}
	var answers [3]int // changes, whole, waits
	for step := range steps {
		desc := j.step()
		for _, name := range j.nodes {
			n := nodes[name]
			gen, want := j.whole(name)
			for _, g := range slices.Sorted(maps.Keys(n.held)) {
				if g+8 < gen {
					delete(n.held, g)
					continue
				}
				tg, ok, err := v.since(name, g, true)
				if err != nil {
					t.Fatalf("step %d (%s): node %s since %d: %v", step, desc, name, g, err)
				}
				if !ok {
					if g != gen || !reflect.DeepEqual(j.known(n.held[g]), want) {
						t.Fatalf("step %d (%s): node %s holding %d (%d pods) told to wait; the FSM's is %d (%d pods)", step, desc, name, g, len(n.held[g]), gen, len(want))
					}
					answers[2]++
					continue
				}
				if tg.Base != 0 && tg.Base != g {
					t.Fatalf("step %d (%s): node %s holding %d answered the changes since %d", step, desc, name, g, tg.Base)
				}
				got := applyTarget(n.held[g], tg)
				if tg.Generation != gen || !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d (%s): node %s holding %d, given %d added and %d removed since %d, holds %v at %d; the FSM's is %v at %d",
						step, desc, name, g, len(tg.Pods), len(tg.Removed), tg.Base, slices.Sorted(maps.Keys(got)), tg.Generation, slices.Sorted(maps.Keys(want)), gen)
				}
				if tg.Base != 0 {
					answers[0]++
				} else {
					answers[1]++
				}
			}
			// The node polls from its own target, or from none.
			tg, ok, err := v.since(name, n.gen, n.gen != 0)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				n.gen, n.pods = tg.Generation, applyTarget(n.pods, tg)
				n.held[n.gen] = n.pods
				if tg.Base == 0 {
					answers[1]++
				}
			}
			// A generation the FSM never had gets the whole target.
			if tg, ok, _ := v.since(name, gen+5, true); !ok || tg.Base != 0 || tg.Generation != gen || len(tg.Pods) != len(want) {
				t.Fatalf("node %s asked from generation %d, the FSM's %d: ok %v, %+v", name, gen+5, gen, ok, tg)
			}
		}
	}
	t.Logf("%d answers as changes, %d whole, %d waits", answers[0], answers[1], answers[2])
	if answers[0] == 0 || answers[1] == 0 || answers[2] == 0 {
		t.Errorf("answers as changes, whole, waits: %v: a kind was not exercised", answers)
	}
}

// copyChanges copies the target changes of c, whose lists are the FSM's.
func copyChanges(c *fsm.Changes) *fsm.Changes {
	return &fsm.Changes{Kind: c.Kind, Index: c.Index, Targets: slices.Clone(c.Targets), TargetGens: slices.Clone(c.TargetGens),
		TargetChanges: slices.Clone(c.TargetChanges), TargetNodes: slices.Clone(c.TargetNodes)}
}

// TestTargetJournalLagging delays the view's consumption of the change
// sets by a random number of them and checks that its answers follow the
// consistency rules (targetJournal's comment): an answer as changes carries
// the generation the view covers; a node holding a generation the view
// has not reached waits instead of getting its whole target again; a whole
// target comes only when the journal cannot answer. Once the view caught
// up, every node converges to the FSM's target: no change was lost.
func TestTargetJournalLagging(t *testing.T) {
	r := seedtest.Rand(t)
	steps := 250
	if testing.Short() {
		steps = 100
	}
	var mu sync.Mutex
	var queue []*fsm.Changes
	j := openJournalReplica(t, r, func(c *fsm.Changes) {
		mu.Lock()
		defer mu.Unlock()
		queue = append(queue, copyChanges(c))
	})
	v := newTargetJournal(j.f)
	v.consume(&fsm.Changes{Kind: fsm.ChangeReset})
	drain := func(n int) {
		mu.Lock()
		defer mu.Unlock()
		n = min(n, len(queue))
		for _, c := range queue[:n] {
			v.consume(c)
		}
		queue = slices.Delete(queue, 0, n)
	}
	j.register(3, 1500)
	nodes := map[string]*simNode{}
	for _, name := range j.nodes {
		nodes[name] = &simNode{}
	}
	var answers [3]int // changes, whole, waits
	poll := func(step int, name string) bool {
		n := nodes[name]
		v.mu.Lock()
		jn := v.nodes[name]
		var from, covered uint64
		if jn != nil {
			from, covered = jn.from, jn.gen
		}
		v.mu.Unlock()
		fsmGen, _ := j.whole(name)
		tg, ok, err := v.since(name, n.gen, n.gen != 0)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !ok:
			answers[2]++
			if n.gen != covered && n.gen != fsmGen && (covered == 0 || n.gen < covered || n.gen > fsmGen) {
				t.Fatalf("step %d: node %s holding %d told to wait; the view covers %d, the FSM %d", step, name, n.gen, covered, fsmGen)
			}
			return false
		case tg.Base != 0:
			answers[0]++
			if tg.Base != n.gen || tg.Generation != covered {
				t.Fatalf("step %d: node %s holding %d given changes since %d labelled %d; the view covers %d", step, name, n.gen, tg.Base, tg.Generation, covered)
			}
		default:
			answers[1]++
			if n.gen != 0 && jn != nil && covered != 0 && n.gen >= from && n.gen <= fsmGen {
				t.Fatalf("step %d: node %s holding %d given its whole target; the journal covers %d to %d, the FSM is at %d", step, name, n.gen, from, covered, fsmGen)
			}
		}
		n.gen, n.pods = tg.Generation, applyTarget(n.pods, tg)
		return true
	}
	for step := range steps {
		j.step()
		drain(r.IntN(4))
		for _, name := range j.nodes {
			if r.IntN(2) == 0 {
				poll(step, name)
			}
		}
	}
	drain(len(queue))
	for _, name := range j.nodes {
		for i := 0; poll(steps, name); i++ {
			if i == 3 {
				t.Fatalf("node %s still answered after %d polls with the view caught up", name, i)
			}
		}
		n := nodes[name]
		gen, want := j.whole(name)
		if n.gen != gen || !reflect.DeepEqual(j.known(n.pods), want) {
			t.Fatalf("node %s converged to %v at %d; the FSM's is %v at %d", name, slices.Sorted(maps.Keys(j.known(n.pods))), n.gen, slices.Sorted(maps.Keys(want)), gen)
		}
	}
	t.Logf("%d answers as changes, %d whole, %d waits", answers[0], answers[1], answers[2])
	if answers[0] == 0 || answers[2] == 0 {
		t.Errorf("answers as changes, whole, waits: %v: a kind was not exercised", answers)
	}
}

// BenchmarkTargetSince measures the leader's answer to a node's long-poll
// after a plan, the view's and the FSM's parts: the changes since the
// node's last target, five new pods on each of 1,000 nodes that run five
// already (as fsm's BenchmarkNodeTargetChanges, which is the FSM's part).
func BenchmarkTargetSince(b *testing.B) {
	const nodes, perNode = 1000, 5
	v := newTargetJournal(nil)
	j := openJournalReplica(b, rand.New(rand.NewPCG(1, 2)), v.consume)
	v.src = j.f
	var wg sync.WaitGroup
	for w := range 8 { // concurrent proposals share entries
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < nodes; i += 8 {
				c := api.Capacity{CPU: 8000, Memory: 64 << 30, Disk: 1 << 40, Ports: 1000}
				cmd, err := fsm.RegisterNode(j.now, api.NodeSpec{Name: fmt.Sprintf("node-%05d", i), Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c}})
				if err == nil {
					_, err = j.kv.Propose(context.Background(), cmd)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	spec := api.JobSpec{Name: "array", Tasks: []api.TaskGroupSpec{{Count: 2 * nodes * perNode, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
		Image: api.Image{Rootfs: "/img"}, Command: []string{"/bin/work"}, Resources: api.Resources{CPU: 500, Memory: 1 << 30}}}}}}}
	cmd, err := fsm.SubmitJobs(j.now, []api.JobSpec{spec})
	if err != nil {
		b.Fatal(err)
	}
	res, err := j.propose(cmd)
	if err != nil {
		b.Fatal(err)
	}
	sr, err := fsm.DecodeSubmitResult(res)
	if err != nil {
		b.Fatal(err)
	}
	plan := func() {
		p := &fsm.Plan{Term: 1, Now: j.now}
		for range perNode {
			for i := range nodes {
				p.Assignments = append(p.Assignments, fsm.Assignment{
					Group: fsm.GroupKey{Job: sr.Jobs[0].ID, Group: "g0"}, Node: fmt.Sprintf("node-%05d", i), Count: 1})
			}
		}
		res, err := j.propose(fsm.CommitPlan(p))
		if err != nil {
			b.Fatal(err)
		}
		if r, _ := fsm.DecodePlanResult(res); r.Placed != nodes*perNode {
			b.Fatalf("placed %d", r.Placed)
		}
	}
	plan()
	known := map[string]uint64{}
	for i := range nodes {
		name := fmt.Sprintf("node-%05d", i)
		known[name], _ = j.f.NodeGeneration(name)
	}
	plan()
	pods := 0
	b.ReportAllocs()
	for b.Loop() {
		for name, gen := range known {
			t, ok, err := v.since(name, gen, true)
			if err != nil || !ok || t.Base == 0 {
				b.Fatalf("node %s: ok %v, err %v, %+v", name, ok, err, t)
			}
			pods += len(t.Pods)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pods), "ns/pod")
}

// BenchmarkTargetJournalConsume measures the view's part of applying a
// plan, on the apply goroutine: consuming the change set of 10,000 tasks
// placed on 1,000 nodes (task i on node i mod 1,000, as fsm's
// BenchmarkApplyPlan places them), in steady state (journals full, cut
// as they grow).
func BenchmarkTargetJournalConsume(b *testing.B) {
	const nodes, tasks = 1000, 10_000
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node-%05d", i)
	}
	c := &fsm.Changes{Kind: fsm.ChangeApplied, Targets: names, TargetGens: make([]uint64, nodes), TargetChanges: make([]fsm.TargetChange, tasks),
		TargetNodes: make([]fsm.TargetNode, nodes)}
	for i, name := range names {
		c.TargetNodes[i] = fsm.TargetNode{Name: name, Tasks: tasks / nodes}
	}
	v := newTargetJournal(nil)
	v.consume(&fsm.Changes{Kind: fsm.ChangeReset})
	gen := uint64(0)
	for b.Loop() {
		b.StopTimer()
		gen++
		for i := range c.TargetChanges {
			c.TargetChanges[i] = fsm.TargetChange{Gen: gen, Job: gen, Index: uint32(i), Attempt: 1, Node: int32(i % nodes)}
		}
		for i := range c.TargetGens {
			c.TargetGens[i] = gen
		}
		b.StartTimer()
		v.consume(c)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tasks), "ns/change")
}

// fakeTargets stands for the FSM: each node's generation and its pods by
// task attempt.
type fakeTargets struct {
	gen  map[string]uint64
	pods map[string]map[fsm.TaskAttempt]api.TargetPod
}

func (s *fakeTargets) NodeGeneration(name string) (uint64, bool) {
	g, ok := s.gen[name]
	return g, ok
}

func (s *fakeTargets) NodeTarget(name string) (uint64, []api.TargetPod, bool) {
	g, ok := s.gen[name]
	var pods []api.TargetPod
	for _, ta := range slices.SortedFunc(maps.Keys(s.pods[name]), func(a, b fsm.TaskAttempt) int { return int(a.Task.Index) - int(b.Task.Index) }) {
		pods = append(pods, s.pods[name][ta])
	}
	return g, pods, ok
}

func (s *fakeTargets) NodeTargetChanges(name string, changes []fsm.TaskAttempt) (uint64, []api.TargetPod, []string, bool) {
	g, ok := s.gen[name]
	var pods []api.TargetPod
	var removed []string
	for _, c := range changes {
		if p, in := s.pods[name][c]; in {
			pods = append(pods, p)
		} else {
			removed = append(removed, taskName(c))
		}
	}
	return g, pods, removed, ok
}

func taskName(ta fsm.TaskAttempt) string { return fmt.Sprintf("t%d/%d", ta.Task.Index, ta.Attempt) }

// TestTargetJournalRules walks one node through the cases of the view's
// answers (targetJournal's comment), the FSM ahead of the view at times.
func TestTargetJournalRules(t *testing.T) {
	a, b := fsm.TaskAttempt{Task: fsm.TaskRef{Job: 1, Index: 1}, Attempt: 1}, fsm.TaskAttempt{Task: fsm.TaskRef{Job: 1, Index: 2}, Attempt: 1}
	src := &fakeTargets{gen: map[string]uint64{"n": 5}, pods: map[string]map[fsm.TaskAttempt]api.TargetPod{"n": {}}}
	v := newTargetJournal(src)
	v.consume(&fsm.Changes{Kind: fsm.ChangeReset})
	// fsmAdds and fsmRemoves change the FSM's state; consume gives the view
	// the change set of a command.
	fsmAdds := func(ta fsm.TaskAttempt) { src.pods["n"][ta] = api.TargetPod{TaskID: taskName(ta)} }
	fsmRemoves := func(ta fsm.TaskAttempt) { delete(src.pods["n"], ta) }
	consume := func(gen uint64, moved bool, changes ...fsm.TargetChange) {
		c := &fsm.Changes{Kind: fsm.ChangeApplied, TargetChanges: changes, TargetNodes: []fsm.TargetNode{{Name: "n", Tasks: 2}}}
		if moved {
			c.Targets, c.TargetGens = []string{"n"}, []uint64{gen}
		}
		v.consume(c)
	}
	change := func(ta fsm.TaskAttempt, gen uint64) fsm.TargetChange {
		return fsm.TargetChange{Gen: gen, Job: ta.Task.Job, Group: ta.Task.Group, Index: ta.Task.Index, Attempt: ta.Attempt}
	}
	expect := func(step string, known uint64, want string) {
		t.Helper()
		tg, ok, err := v.since("n", known, true)
		got := "wait"
		switch {
		case err != nil:
			got = err.Error()
		case ok && tg.Base == 0:
			got = fmt.Sprintf("whole %d %v", tg.Generation, show(tg.Pods))
		case ok:
			got = fmt.Sprintf("changes %d->%d %v -%v", tg.Base, tg.Generation, show(tg.Pods), tg.Removed)
		}
		if got != want {
			t.Errorf("%s: since(%d) = %s, want %s", step, known, got, want)
		}
	}

	expect("after a reset, current by the FSM", 5, "wait")
	expect("after a reset", 3, "whole 5 []")
	expect("after a reset, from none", 0, "whole 5 []")

	fsmAdds(a)
	src.gen["n"] = 6
	expect("FSM ahead of a view that holds no journal", 5, "whole 6 [t1/1]")
	expect("FSM ahead of a view that holds no journal, current by the FSM", 6, "wait")
	consume(6, true, change(a, 6))
	expect("the journal starts at its first change", 5, "whole 6 [t1/1]")
	expect("current", 6, "wait")

	fsmAdds(b)
	src.gen["n"] = 7
	expect("FSM ahead, the node at the view's generation", 6, "wait")
	expect("the node ahead of the view (got its whole target from the FSM)", 7, "wait")
	consume(7, true, change(b, 7))
	expect("the view caught up", 6, "changes 6->7 [t2/1] -[]")
	expect("the view caught up, current", 7, "wait")

	fsmRemoves(a) // reported ended: journaled under 8, no new generation
	consume(8, false, change(a, 8))
	expect("an ended task does not wake the node", 7, "wait")
	expect("an ended task goes with the changes", 6, "changes 6->7 [t2/1] -[t1/1]")

	fsmAdds(a) // a later command, not consumed yet: sent at the next poll
	src.gen["n"] = 8
	fsmRemoves(b)
	expect("labelled with what the view covers", 6, "changes 6->7 [t1/1] -[t2/1]")
	consume(8, true, change(a, 8), change(b, 8))
	expect("the next poll", 7, "changes 7->8 [t1/1] -[t2/1]")

	src.gen["n"] = 9 // a capbox's change
	consume(9, true, fsm.TargetChange{Gen: 9, Restart: true})
	expect("a restart", 8, "whole 9 [t1/1]")
	expect("after a restart", 9, "wait")
	expect("a generation the FSM never had", 12, "whole 9 [t1/1]")

	v.consume(&fsm.Changes{Kind: fsm.ChangeReset})
	expect("a reset, current by the FSM", 9, "wait")
	expect("a reset", 8, "whole 9 [t1/1]")

	src.gen["n"] = 10
	consume(10, true, change(a, 10))
	src.gen["n"] = 12 // two commands the view has not consumed
	expect("a node ahead of the view, the FSM further ahead", 11, "wait")
	expect("at the view's generation, the FSM ahead", 10, "wait")
	consume(11, true, change(b, 11))
	expect("the view catching up", 10, "changes 10->11 [] -[t2/1]")
	expect("the view caught up with the node", 11, "wait")
	if _, _, err := v.since("m", 1, true); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("an unknown node: %v", err)
	}

	// n removed and registered again: a new node, from generation 0, whose
	// journal starts afresh without moving it.
	src.gen["n"], src.pods["n"] = 0, map[fsm.TaskAttempt]api.TargetPod{}
	consume(1, false, fsm.TargetChange{Gen: 1, Restart: true})
	expect("registered again, the node new", 0, "wait")
	expect("registered again, a nodelet of the node removed", 11, "whole 0 []")
	fsmAdds(a)
	src.gen["n"] = 1
	consume(1, true, change(a, 1))
	expect("the new node's first change", 0, "whole 1 [t1/1]")
	expect("the new node's first change, current", 1, "wait")
}

func show(pods []api.TargetPod) []string {
	ids := []string{}
	for _, p := range pods {
		ids = append(ids, p.TaskID)
	}
	return ids
}
