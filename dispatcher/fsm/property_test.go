package fsm

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// roundView is what the random commands read a round's input through:
// the dispatcher's views (package roundinput), which import this package
// and so are given by the black-box test that runs the commands
// (TestRandomCommands).
type roundView interface {
	// Build reads a round's input whole, with no limit; AddVictims adds
	// its nodes' victims below a priority.
	Build(f *FSM, now time.Time) *placement.Input
	AddVictims(f *FSM, in *placement.Input, below int32)
	// NewKept returns an input kept from read to read.
	NewKept() keptInput
}

// keptInput is a round's input kept from read to read, following the
// change sets it consumes (roundinput.Kept).
type keptInput interface {
	Consume(c *Changes)
	// Read reads it at now, with no limit.
	Read(f *FSM, now time.Time) *placement.Input
	// Placed says a Placer saw the input; SetModified that its nodes'
	// Free was lowered in place.
	Placed()
	SetModified()
}

// runRandomCommands applies random command sequences (valid, stale and
// invalid) and checks the invariants after every step, reading rounds'
// inputs through v.
func runRandomCommands(t *testing.T, v roundView) {
	r := seedtest.Rand(t)
	runs, steps := 8, 250
	if testing.Short() {
		runs = 4
	}
	targetDiffs, removed, drainStopped := 0, 0, 0
	preempted, cached, sets, releases, capTasks, forgotten, pruned := 0, uint64(0), 0, 0, 0, 0, 0
	// Some commands are rare in a run (a capbox task starts in about half
	// the runs): up to twice the runs go on until each was exercised.
	exercised := func() bool {
		return cached > 0 && capTasks > 0 && sets > 0 && releases > 0 && preempted > 0 && forgotten > 0 && removed > 0 && drainStopped > 0 &&
			pruned > 0
	}
	for run := 0; run < runs || run < 2*runs && !exercised(); run++ {
		h := &propHarness{t: t, r: r, f: New(), s: newMemStore(), now: time.Unix(1_800_000_000, 0), v: v, input: v.NewKept()}
		h.f.Subscribe(func(c *Changes) {
			h.consume(c)
			h.input.Consume(c)
		})
		h.s.keepBack = true // stored now and then, as raftkv does
		for step := range steps {
			desc := h.step()
			if err := h.check(); err != nil {
				t.Fatalf("run %d step %d (%s): %v", run, step, desc, err)
			}
		}
		t.Logf("run %d: %d commands applied, %d rejected, %d tasks placed, %d reports applied, %d tasks preempted, %d slots cached, %d reused, %d capbox sets created, %d releases, %d capbox task stops, %d starts, %d jobs forgotten",
			run, h.counts[0], h.counts[1], h.counts[2], h.counts[3], h.counts[4], h.f.mu.nextSlot-1, h.counts[5], h.counts[6], h.counts[7], h.counts[8], h.counts[9], h.counts[10])
		forgotten += h.counts[10]
		pruned += h.counts[11]
		preempted += h.counts[4]
		sets += h.counts[6]
		releases += h.counts[7]
		capTasks += h.counts[9]
		cached += h.f.mu.nextSlot - 1
		targetDiffs += h.targetDiffs
		removed += h.removed
		drainStopped += h.drainStopped
	}
	if removed == 0 || drainStopped == 0 {
		t.Errorf("%d nodes removed, %d tasks stopped at a drain deadline: drains were not exercised", removed, drainStopped)
	}
	if targetDiffs == 0 {
		t.Error("no change of a node's target was checked against the change sets' target changes")
	}
	if cached == 0 {
		t.Error("no run cached a slot: slots were never exercised")
	}
	if capTasks == 0 {
		t.Error("no run started a capbox task: capbox tasks were not exercised")
	}
	if sets == 0 || releases == 0 {
		t.Errorf("%d capbox commands created sets and %d released capboxes: capboxes were not exercised", sets, releases)
	}
	if preempted == 0 {
		t.Error("no run preempted a task: the preemption commands were never exercised")
	}
	if forgotten == 0 {
		t.Error("no run forgot a job: ForgetJobs was never exercised")
	}
	if pruned == 0 {
		t.Error("no run pruned a summary: PruneHistory was never exercised")
	}
}

type propHarness struct {
	t     *testing.T
	r     *rand.Rand
	f     *FSM
	s     *memStore
	index uint64
	now   time.Time
	nodes []string
	jobs  []string
	// ams and sets are the appmaster jobs and capbox sets submitted;
	// boxStates the capboxes' states at the last check.
	ams, sets []string
	boxStates map[string]api.CapboxState
	// changed is each job's last change as the FSM's change sets told
	// it (the applied index for every job at a reset); changesErr is the
	// first change set found wrong.
	changed    map[uint64]uint64
	changesErr error
	term       uint64
	counts     [12]int // ok, rejected, placed tasks, reports applied, tasks preempted, slots reused, capbox sets created, releases applied, capbox task stops and starts applied, jobs forgotten, summaries pruned
	// targets holds each node's target, by task ID, as the last check
	// saw it; gens are the nodes' generations as the change sets told
	// them; named are the task IDs the target changes named by node since
	// the last check, and restarted the nodes whose journal they
	// restarted. targetDiffs counts the pods found changed and named.
	targets     map[string]map[string]api.TargetPod
	gens        map[string]uint64
	named       map[string]map[string]bool
	restarted   map[string]bool
	targetDiffs int
	// removed counts the nodes removed, drainStopped the tasks stopped at
	// a drain deadline.
	removed, drainStopped int
	// input is a round's input kept from check to check; seen is a copy
	// of its nodes as the last check left them (as a Placer saw them).
	v     roundView
	input keptInput
	seen  []placement.Node
}

func (h *propHarness) apply(cmd []byte) ([]byte, error) {
	h.index++
	before := h.f.dump()
	res, writes, err := h.s.apply(h.f, h.index, cmd)
	if err != nil {
		if writes != 0 {
			h.t.Fatalf("rejected command (%v) attempted %d writes", err, writes)
		}
		if after := h.f.dump(); after != before {
			h.t.Fatalf("rejected command (%v) changed the state:\nbefore:\n%s\nafter:\n%s", err, before, after)
		}
		h.counts[1]++
		return nil, err
	}
	h.counts[0]++
	if h.r.IntN(4) == 0 {
		h.s.store(h.f)
	}
	if err := h.checkCapboxStates(); err != nil {
		h.t.Fatalf("after command %d: %v", h.index, err)
	}
	return res, nil
}

func (h *propHarness) step() string {
	r := h.r
	switch k := r.IntN(28); {
	case k < 2 || len(h.nodes) == 0:
		name := fmt.Sprintf("n%d", r.IntN(6))
		c := api.Capacity{CPU: 1000 * (2 + r.Int64N(8)), Memory: (2 + r.Int64N(16)) << 30, GPUs: r.Int64N(3), Ports: 10}
		for _, n := range h.f.Nodes() { // never shrink a node below what it holds
			if n.Spec.Name == name {
				c = n.Spec.Capacity
				c.CPU += 1000
			}
		}
		spec := api.NodeSpec{Name: name, Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: api.Capacity{CPU: 2 * c.CPU, Memory: c.Memory, GPUs: c.GPUs, Ports: c.Ports}}}
		cmd, _ := RegisterNode(h.now, spec)
		if _, err := h.apply(cmd); err != nil {
			h.t.Fatalf("register %s: %v", name, err)
		}
		if !slices.Contains(h.nodes, name) {
			h.nodes = append(h.nodes, name)
		}
		return "register " + name
	case k < 5:
		var specs []api.JobSpec
		bad := r.IntN(8) == 0
		for i := range 1 + r.IntN(3) {
			s := api.JobSpec{Name: "j", QoS: []api.QoS{api.QoSOnline, api.QoSOffline}[r.IntN(2)], Priority: r.Int32N(3),
				DistinctNodes: r.IntN(6) == 0, Queue: []string{"", "a", "b"}[r.IntN(3)]}
			s.Retry.MaxAttempts = 1 + r.Int32N(3)
			if r.IntN(4) == 0 {
				s.IdempotencyKey = fmt.Sprintf("k%d", r.IntN(10))
			}
			if r.IntN(6) == 0 { // every node matches: the check runs, placement goes on
				s.Constraints = []api.Constraint{{Key: "gpu", Op: api.OpNotExists}}
			}
			for range 1 + r.IntN(2) {
				s.Tasks = append(s.Tasks, api.TaskGroupSpec{Count: 1 + r.Int64N(20), Pod: api.PodSpec{Containers: []api.ContainerSpec{{
					Image: api.Image{Rootfs: "/img"}, Command: []string{"/x"},
					Resources: api.Resources{CPU: 250 * (1 + r.Int64N(8)), Memory: (1 + r.Int64N(4)) << 29, GPUs: r.Int64N(2) * r.Int64N(2)},
				}}}})
			}
			if r.IntN(5) == 0 {
				s.Appmaster = true
				if r.IntN(2) == 0 {
					s.Tasks = nil // client mode
				}
			}
			if bad && i == 0 {
				s.Tasks = append(s.Tasks, api.TaskGroupSpec{Count: 0})
			}
			specs = append(specs, s)
		}
		cmd, _ := SubmitJobs(h.now, specs)
		res, err := h.apply(cmd)
		if bad != (err != nil) {
			h.t.Fatalf("submit (bad=%v): %v", bad, err)
		}
		if err == nil {
			sr, err := DecodeSubmitResult(res)
			if err != nil {
				h.t.Fatal(err)
			}
			for i, j := range sr.Jobs {
				if !slices.Contains(h.jobs, j.ID) {
					h.jobs = append(h.jobs, j.ID)
					if specs[i].Appmaster {
						h.ams = append(h.ams, j.ID)
					}
				}
			}
		}
		return fmt.Sprintf("submit %d (bad=%v)", len(specs), bad)
	case k < 10:
		// A plan: mostly from the placement input, with stale and wrong
		// assignments mixed in.
		in := h.v.Build(h.f, h.now)
		p := &Plan{Term: h.term, Now: h.now}
		if r.IntN(10) == 0 {
			h.term++
			p.Term = h.term
		}
		if r.IntN(15) == 0 && h.term > 0 {
			p.Term = h.term - 1
		}
		for range r.IntN(6) {
			a := Assignment{Node: h.nodes[r.IntN(len(h.nodes))], Count: 1 + r.Int64N(4)}
			var g *placement.Group
			if len(in.Groups) > 0 && r.IntN(5) > 0 {
				g = &in.Groups[r.IntN(len(in.Groups))]
				a.Group = GroupKey(g.Key)
			} else if len(h.jobs) > 0 {
				a.Group = GroupKey{Job: h.jobs[r.IntN(len(h.jobs))], Group: "g" + fmt.Sprint(r.IntN(3))}
			}
			if r.IntN(20) == 0 {
				a.Node = "ghost"
			}
			if r.IntN(30) == 0 {
				a.Count = 0
			}
			// Mostly slots of the node that hold the group's tasks, sometimes
			// a wrong one.
			for _, n := range in.Nodes {
				if n.ID != a.Node || g == nil || r.IntN(3) == 0 {
					continue
				}
				for _, s := range n.Slots {
					if s.QoS == g.QoS && s.Shape == g.Demand && int64(len(a.Slots)) < a.Count {
						a.Slots = append(a.Slots, s.ID)
					}
				}
			}
			if r.IntN(25) == 0 {
				a.Slots = append(a.Slots, fmt.Sprint("s", r.IntN(50)))
			}
			p.Assignments = append(p.Assignments, a)
		}
		res, err := h.apply(CommitPlan(p))
		if err == nil {
			pr, err := DecodePlanResult(res)
			if err != nil {
				h.t.Fatal(err)
			}
			h.counts[2] += int(pr.Placed)
			for i, a := range p.Assignments {
				if !slices.ContainsFunc(pr.Rejected, func(x Rejection) bool { return x.Index == i }) {
					h.counts[5] += len(a.Slots)
				}
			}
		}
		return fmt.Sprintf("plan of %d", len(p.Assignments))
	case k < 16:
		var reps []Report
		f := h.f
		var tasks []*task
		var cts []*captask
		f.eachTaskLocked(func(t *task) {
			tasks = append(tasks, t)
			cts = append(cts, f.mu.captasks[t.key]...)
		})
		for range r.IntN(3) {
			if len(cts) == 0 {
				break
			}
			c := cts[r.IntN(len(cts))]
			st := []api.TaskState{api.TaskStarting, api.TaskRunning, api.TaskSucceeded, api.TaskFailed, api.TaskKilled}[r.IntN(5)]
			reps = append(reps, Report{Node: f.taskLocked(c.box).node, TaskReport: &api.TaskReport{TaskID: c.id(), State: st, Reason: api.ReasonExited, Time: h.now}})
		}
		for range 1 + r.IntN(6) {
			if len(tasks) == 0 {
				break
			}
			t := tasks[r.IntN(len(tasks))]
			states := []api.TaskState{api.TaskStarting, api.TaskRunning, api.TaskSucceeded, api.TaskFailed, api.TaskKilled, api.TaskLost}
			st := states[r.IntN(len(states))]
			if next := slices.DeleteFunc(t.state.Next(), func(s api.TaskState) bool { return s == api.TaskPending }); len(next) > 0 && r.IntN(8) > 0 {
				st = next[r.IntN(len(next))] // mostly legal transitions
			}
			rep := Report{Node: t.node, TaskReport: &api.TaskReport{TaskID: taskID(t.key, t.attempt), State: st, Reason: api.ReasonExited, Time: h.now}}
			if r.IntN(10) == 0 {
				rep.TaskID = taskID(t.key, t.attempt+1)
			}
			if r.IntN(6) == 0 {
				rep.Reason = api.ReasonStopped
			}
			reps = append(reps, rep)
		}
		var ttl time.Duration
		if r.IntN(2) == 0 {
			ttl = time.Duration(1+r.IntN(30)) * time.Second
		}
		res, err := h.apply(UpdateTasksCaching(h.now, reps, ttl))
		if err == nil {
			ur, err := DecodeUpdateResult(res)
			if err != nil {
				h.t.Fatal(err)
			}
			h.counts[3] += ur.Applied
		}
		return fmt.Sprintf("update of %d", len(reps))
	case k < 18:
		name := h.nodes[r.IntN(len(h.nodes))]
		st := []api.NodeState{api.NodeReady, api.NodeDraining, api.NodeDown}[r.IntN(3)]
		h.apply(SetNodeState(h.now, name, st))
		return fmt.Sprintf("node %s %s", name, st)
	case k < 19:
		if len(h.jobs) == 0 {
			return "nothing"
		}
		id := h.jobs[r.IntN(len(h.jobs))]
		h.apply(CancelJob(h.now, id))
		return "cancel " + id
	case k < 20:
		// Preemptions as the loop would choose them, for every pending
		// group, with stale and wrong ones mixed in.
		in := h.v.Build(h.f, h.now)
		h.v.AddVictims(h.f, in, api.MaxPriority+1)
		plan := &placement.Plan{}
		for _, g := range in.Groups {
			plan.Pending = append(plan.Pending, placement.Pending{Group: g.Key, Count: g.Pending, Reason: placement.ReasonNoCapacity})
		}
		var ps []Preemption
		for _, p := range placement.New(nil).Preempt(in, plan, 1+r.IntN(5)) {
			ps = append(ps, Preemption{Task: p.Task, Node: p.Node, For: GroupKey(p.For)})
		}
		var victims []placement.Victim
		for _, n := range in.Nodes {
			victims = append(victims, n.Victims...)
		}
		slices.SortFunc(victims, func(a, b placement.Victim) int { return strings.Compare(a.Task, b.Task) }) // AddVictims' order is a map's
		if len(victims) > 0 && len(in.Groups) > 0 && r.IntN(3) == 0 {
			v := victims[r.IntN(len(victims))]
			ps = append(ps, Preemption{Task: v.Task, Node: h.nodes[r.IntN(len(h.nodes))], For: GroupKey(in.Groups[r.IntN(len(in.Groups))].Key)})
		}
		term := h.term
		if r.IntN(15) == 0 && term > 0 {
			term--
		}
		res, err := h.apply(PreemptTasks(h.now, term, ps))
		if err == nil {
			pr, err := DecodePreemptResult(res)
			if err != nil {
				h.t.Fatal(err)
			}
			h.counts[4] += int(pr.Preempted)
		}
		return fmt.Sprintf("preempt %d", len(ps))
	case k < 21:
		if len(h.jobs) == 0 {
			return "nothing"
		}
		am := h.jobs[r.IntN(len(h.jobs))]
		if len(h.ams) > 0 && r.IntN(5) > 0 {
			am = h.ams[r.IntN(len(h.ams))]
		}
		var reqs []api.CapboxRequest
		for range 1 + r.IntN(2) {
			rq := api.CapboxRequest{Name: "c", Count: 1 + r.Int64N(6), AllOrNothing: r.IntN(3) == 0, DistinctNodes: r.IntN(6) == 0,
				Resources: api.Resources{CPU: 250 * (1 + r.Int64N(8)), Memory: (1 + r.Int64N(4)) << 29}}
			if r.IntN(4) == 0 {
				rq.IdempotencyKey = fmt.Sprintf("k%d", r.IntN(4))
			}
			if r.IntN(10) == 0 {
				rq.Count = 0
			}
			reqs = append(reqs, rq)
		}
		cmd, _ := CreateCapboxes(h.now, am, reqs)
		if res, err := h.apply(cmd); err == nil {
			sr, err := DecodeSubmitResult(res)
			if err != nil {
				h.t.Fatal(err)
			}
			for _, j := range sr.Jobs {
				if !slices.Contains(h.jobs, j.ID) {
					h.jobs = append(h.jobs, j.ID)
					h.sets = append(h.sets, j.ID)
				}
			}
			h.counts[6]++
		}
		return "capboxes for " + am
	case k < 22:
		// Release a few capboxes (or tasks, or IDs that name nothing).
		var ids []string
		for range 1 + r.IntN(3) {
			if len(h.jobs) == 0 {
				break
			}
			from := h.jobs
			if len(h.sets) > 0 && r.IntN(6) > 0 {
				from = h.sets
			}
			ids = append(ids, fmt.Sprintf("%s/0/%d/1", from[r.IntN(len(from))], r.IntN(7)))
		}
		am := "j1"
		if len(h.ams) > 0 {
			am = h.ams[r.IntN(len(h.ams))]
		}
		if _, err := h.apply(ReleaseCapboxes(h.now, am, ids)); err == nil {
			h.counts[7]++
		}
		return fmt.Sprint("release ", ids)
	case k < 23:
		// Start tasks in capboxes (mostly running ones), or stop some;
		// first, at times, place a capbox, as the random plans seldom do.
		if len(h.sets) > 0 && r.IntN(2) == 0 {
			set := h.sets[r.IntN(len(h.sets))]
			if j := h.f.mu.jobs.get(mustJobNum(set)); j != nil {
				h.apply(CommitPlan(&Plan{Term: h.term, Now: h.now, Assignments: []Assignment{{
					Group: GroupKey{Job: set, Group: j.groups[0].name}, Node: h.nodes[r.IntN(len(h.nodes))], Count: 1}}}))
			}
		}
		var boxes []*task
		var running []*task
		h.f.eachTaskLocked(func(t *task) {
			if h.f.mu.jobs.get(t.key.job).owner() != nil && t.attempt == 1 {
				boxes = append(boxes, t)
				if t.state == api.TaskRunning {
					running = append(running, t)
				}
			}
		})
		if len(running) > 0 && r.IntN(4) > 0 {
			boxes = running
		}
		if len(boxes) == 0 {
			return "nothing"
		}
		b := boxes[r.IntN(len(boxes))]
		if (b.state == api.TaskAssigned || b.state == api.TaskStarting) && !b.stop {
			// Most capboxes the random plans place are not running yet.
			h.apply(UpdateTasks(h.now, []Report{{Node: b.node, TaskReport: &api.TaskReport{TaskID: taskID(b.key, 1), State: api.TaskRunning, Time: h.now}}}))
		}
		am := h.f.mu.jobs.get(b.key.job).owner().id
		if r.IntN(3) == 0 {
			if r.IntN(8) == 0 {
				am = "j1"
			}
			var ids []string
			for _, c := range h.f.mu.captasks[b.key] {
				if r.IntN(2) == 0 {
					ids = append(ids, c.id())
				}
			}
			if len(ids) == 0 {
				ids = []string{taskID(b.key, 1) + "/none"}
			}
			if _, err := h.apply(StopCapTasks(h.now, am, ids)); err == nil {
				h.counts[8]++
			}
			return fmt.Sprint("stop capbox tasks ", ids)
		}
		var specs []api.CapTaskSpec
		for range 1 + r.IntN(3) {
			specs = append(specs, api.CapTaskSpec{Capbox: taskID(b.key, 1), Name: fmt.Sprint("t", r.IntN(6)), Pod: api.PodSpec{Containers: []api.ContainerSpec{{
				Image: api.Image{Rootfs: "/img"}, Command: []string{"/x"},
				Resources: api.Resources{CPU: 100 * (1 + r.Int64N(10)), Memory: (1 + r.Int64N(4)) << 28},
			}}}})
		}
		cmd, _ := StartCapTasks(h.now, am, specs)
		if _, err := h.apply(cmd); err == nil {
			h.counts[9]++
		}
		return fmt.Sprintf("start %d capbox tasks in %s", len(specs), taskID(b.key, 1))
	case k < 24:
		// Mostly the jobs Forgettable offers; now and then others (not
		// finished, capbox sets, unknown, forgotten), which are kept.
		var ids []string
		if r.IntN(3) > 0 {
			ids = h.f.Forgettable(h.now, 1+r.IntN(4))
		}
		for range r.IntN(3) {
			if len(h.jobs) > 0 {
				ids = append(ids, h.jobs[r.IntN(len(h.jobs))])
			}
		}
		if len(h.sets) > 0 && r.IntN(4) == 0 {
			ids = append(ids, h.sets[r.IntN(len(h.sets))])
		}
		if r.IntN(10) == 0 {
			ids = append(ids, "j999999", "x")
		}
		forget := ForgetJobs
		if r.IntN(3) > 0 {
			forget = ForgetJobsToHistory
		}
		res, err := h.apply(forget(h.now, ids))
		if err != nil {
			h.t.Fatalf("forget %v: %v", ids, err)
		}
		fr, err := DecodeForgetResult(res)
		if err != nil || fr.Forgotten+fr.Kept != len(ids) {
			h.t.Fatalf("forget %v: result %+v, %v", ids, fr, err)
		}
		h.counts[10] += fr.Forgotten
		return fmt.Sprintf("forget %v: %+v", ids, fr)
	case k < 25:
		return h.drainStep()
	case k == 25:
		// Mostly the summaries HistoryPrunable offers; now and then jobs
		// without one (live, unknown, pruned), which are kept.
		ids := h.f.HistoryPrunable(h.now.Add(-time.Duration(r.IntN(20))*time.Second), r.IntN(6), 1+r.IntN(4))
		if r.IntN(3) == 0 && len(h.jobs) > 0 {
			ids = append(ids, h.jobs[r.IntN(len(h.jobs))], "j999999")
		}
		res, err := h.apply(PruneHistory(h.now, ids))
		if err != nil {
			h.t.Fatalf("prune %v: %v", ids, err)
		}
		pr, err := DecodePruneResult(res)
		if err != nil || pr.Pruned+pr.Kept != len(ids) {
			h.t.Fatalf("prune %v: result %+v, %v", ids, pr, err)
		}
		h.counts[11] += pr.Pruned
		return fmt.Sprintf("prune %v: %+v", ids, pr)
	default:
		h.now = h.now.Add(time.Duration(r.IntN(3000)) * time.Millisecond)
		return "advance"
	}
}

// drainStep drains, undrains or removes a node, or ends a drain, now and
// then one not registered.
func (h *propHarness) drainStep() string {
	r := h.r
	name := h.nodes[r.IntN(len(h.nodes))]
	if r.IntN(10) == 0 {
		name = "nx"
	}
	var cmd []byte
	var desc string
	switch r.IntN(4) {
	case 0:
		var deadline time.Time
		if r.IntN(3) > 0 {
			deadline = h.now.Add(time.Duration(r.IntN(4000)-2000) * time.Millisecond)
		}
		cmd, desc = DrainNode(h.now, name, deadline), fmt.Sprintf("drain %s until %v", name, deadline)
	case 1:
		cmd, desc = UndrainNode(h.now, name), "undrain "+name
	case 2:
		cmd, desc = EndDrain(h.now, name), "end drain of "+name
	default:
		cmd, desc = RemoveNode(h.now, name), "remove "+name
	}
	res, err := h.apply(cmd)
	switch {
	case name == "nx":
		if !errors.Is(err, ErrNotFound) {
			h.t.Fatalf("%s: %v, want ErrNotFound", desc, err)
		}
	case err != nil && !errors.Is(err, ErrNodeBusy):
		h.t.Fatalf("%s: %v", desc, err)
	case err != nil:
	case cmd[0] == cmdRemoveNode:
		h.removed++
		h.nodes = slices.DeleteFunc(h.nodes, func(n string) bool { return n == name })
		delete(h.targets, name)
		delete(h.gens, name) // a node registered again is new, from generation 0
		if _, _, ok := h.f.NodeTarget(name); ok {
			h.t.Fatalf("%s: the node is still there", desc)
		}
	default:
		dr, err := DecodeDrainResult(res)
		if err != nil {
			h.t.Fatalf("%s: result: %v", desc, err)
		}
		desc += fmt.Sprintf(": %+v", dr)
		h.drainStopped += dr.Stopped
	}
	return fmt.Sprintf("%s: %v", desc, err)
}

// check verifies the invariants, recomputing what the FSM derives, and that
// a fresh FSM loaded from the store is identical.
func (h *propHarness) check() error {
	h.s.store(h.f) // what a read of the store, or a restart, sees
	if err := h.checkChangedSince(); err != nil {
		return err
	}
	if err := h.checkTargetChanges(); err != nil {
		return err
	}
	if err := h.checkRoundInput(); err != nil {
		return err
	}
	if err := h.checkQueueCounts(); err != nil {
		return err
	}
	f := h.f
	var states []NodeState
	for _, n := range f.Nodes() {
		st := NodeState{Name: n.Spec.Name, State: n.State, Tasks: n.Tasks}
		if n.Drained {
			st.DrainDeadline = n.DrainDeadline
		}
		states = append(states, st)
	}
	if got := f.AppendNodeStates(nil); !slices.Equal(got, states) {
		return fmt.Errorf("AppendNodeStates = %v, Nodes says %v", got, states)
	}
	f.mu.RLock()
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if len(f.mu.nodeList) != len(f.mu.nodes) || !slices.IsSortedFunc(f.mu.nodeList, byName) {
		bad("node list of %d nodes (map %d) out of order or out of step", len(f.mu.nodeList), len(f.mu.nodes))
	}
	for _, n := range f.mu.nodeList {
		if f.mu.nodes[n.spec.Name] != n {
			bad("node list holds %s, not the map's", n.spec.Name)
		}
	}
	used, releasing := map[string]api.Allocatable{}, map[string]api.Allocatable{}
	queueUsed := map[string]api.Capacity{}
	onNode := map[taskKey]string{}
	for name, n := range f.mu.nodes {
		for i, t := range n.tasks {
			k := t.key
			if int(t.at) != i {
				bad("task %v at %d of %s's index says it is at %d", k, i, name, t.at)
			}
			if prev, dup := onNode[k]; dup {
				bad("task %v on %s and %s", k, prev, name)
			}
			onNode[k] = name
			if t.node != name || !t.active() {
				bad("task %v in %s's index has node %s state %v", k, name, t.node, t.state)
			}
			j := f.mu.jobs.get(k.job)
			u := used[name]
			if j.qos == api.QoSOnline {
				u.Online = u.Online.Plus(j.groups[k.group].demand, 1)
			} else {
				u.Offline = u.Offline.Plus(j.groups[k.group].demand, 1)
			}
			used[name] = u
			queueUsed[j.queue] = queueUsed[j.queue].Plus(j.groups[k.group].demand, 1)
			if t.stop {
				rel := releasing[name]
				rel.AddTier(j.qos, j.groups[k.group].demand, 1)
				releasing[name] = rel
			}
		}
		if used[name] != n.used {
			bad("node %s used %+v, tasks hold %+v", name, n.used, used[name])
		}
		if releasing[name] != n.releasing {
			bad("node %s releasing %+v, tasks told to stop hold %+v", name, n.releasing, releasing[name])
		}
		var cached api.Allocatable
		for _, s := range n.slots {
			cached.AddTier(s.qos, s.shape, 1)
			if s.node != n {
				bad("slot %s on %s names another node", s.id, name)
			}
		}
		if cached != n.cached {
			bad("node %s caches %+v, its slots hold %+v", name, n.cached, cached)
		}
		for _, c := range []api.Capacity{n.free(api.QoSOnline), n.free(api.QoSOffline)} {
			if c.CPU < 0 || c.Memory < 0 || c.GPUs < 0 || c.Disk < 0 || c.Ports < 0 {
				bad("node %s over capacity: free %+v", name, c)
			}
		}
	}
	if !maps.Equal(queueUsed, f.mu.queueUsed) {
		bad("queues use %v, their active tasks hold %v", f.mu.queueUsed, queueUsed)
	}
	type counts struct{ active, ok, recs int64 }
	per := map[[2]uint64]*counts{}
	var tasks []*task
	f.eachTaskLocked(func(t *task) { tasks = append(tasks, t) })
	for _, t := range tasks {
		k := t.key
		c := per[[2]uint64{k.job, uint64(k.group)}]
		if c == nil {
			c = &counts{}
			per[[2]uint64{k.job, uint64(k.group)}] = c
		}
		c.recs++
		if t.active() {
			c.active++
			if onNode[k] != t.node {
				bad("active task %v on %s is missing from its node's index", k, t.node)
			}
		}
		if t.state == api.TaskSucceeded {
			c.ok++
		}
		if g := f.mu.jobs.get(k.job).groups[k.group]; int64(k.index) >= g.next {
			bad("task %v has a record but index ≥ next %d", k, g.next)
		}
	}
	for j := range f.mu.jobs.all() {
		for _, g := range j.groups {
			c := per[[2]uint64{j.num, uint64(g.idx)}]
			if c == nil {
				c = &counts{}
			}
			if sum := g.count - g.next + int64(len(g.requeue)) + g.active + g.succeeded + g.failed + g.killed; sum != g.count {
				bad("group %s: counts add to %d, count %d", g.key(), sum, g.count)
			}
			if g.active != c.active || g.succeeded != c.ok {
				bad("group %s: active %d ok %d, records say %d %d", g.key(), g.active, g.succeeded, c.active, c.ok)
			}
			if int64(len(g.tasks)) > g.next {
				bad("group %s: %d tasks placed, next index %d", g.key(), len(g.tasks), g.next)
			}
			for i, t := range g.tasks {
				if t.key != (taskKey{j.num, g.idx, uint32(i)}) {
					bad("group %s: task %v at index %d", g.key(), t.key, i)
				}
			}
			seen := map[uint32]bool{}
			for _, q := range g.requeue {
				t := f.taskLocked(taskKey{j.num, g.idx, q.index})
				if seen[q.index] || t == nil || t.active() || t.state == api.TaskSucceeded {
					bad("group %s: requeued index %d twice, without a record or still active", g.key(), q.index)
				}
				seen[q.index] = true
			}
			if (!j.cancelled && g.pending() > 0) != inPending(f, g) {
				bad("group %s: pending index out of step", g.key())
			}
		}
	}
	checkForgotten(f, h.s, bad)
	checkHistory(f, h.s, bad)
	for i, g := range slices.Collect(f.mu.pending.gs.all()) {
		if g.pendingAt != i+1 || f.mu.jobs.get(g.job.num) != g.job {
			bad("pending set: entry %d is group %s of place %d, or of no job", i, g.key(), g.pendingAt)
		}
	}
	f.mu.RUnlock()
	g := New()
	if err := g.Load(h.s); err != nil {
		return err
	}
	if a, b := f.dump(), g.dump(); a != b {
		bad("loaded state differs:\nlive:\n%s\nloaded:\n%s", a, b)
	}
	for j := range f.mu.jobs.all() { // dump does not show specs
		lj := g.mu.jobs.get(j.num)
		if lj == nil || !reflect.DeepEqual(lj.specOf(), j.specOf()) {
			bad("job %s: loaded spec differs", j.id)
			continue
		}
		// Apply skimmed the live job's fields; Load took them from the
		// decoded spec.
		if !reflect.DeepEqual(lj.jobFields, j.jobFields) || !reflect.DeepEqual(lj.jobFields, fieldsOf(j.specOf())) {
			bad("job %s: fields %+v live, %+v loaded, %+v in its spec", j.id, j.jobFields, lj.jobFields, fieldsOf(j.specOf()))
		}
		for i, g := range j.groups {
			if lg := lj.groups[i]; g.name != lg.name || g.demand != lg.demand || g.count != lg.count {
				bad("job %s: group %d is %q %+v ×%d live, %q %+v ×%d loaded", j.id, i, g.name, g.demand, g.count, lg.name, lg.demand, lg.count)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// checkQueueCounts checks QueueCounts against the jobs' and capbox sets'
// statuses, and that QueueCounts and Census, read in chunks of any size,
// count what one walk under one hold of the lock counts.
func (h *propHarness) checkQueueCounts() error {
	want := map[string]*QueueCount{}
	add := func(s JobStatus, set bool) {
		q := want[s.Spec.Queue]
		if q == nil {
			q = &QueueCount{Name: s.Spec.Queue}
			want[s.Spec.Queue] = q
		}
		if !set {
			q.Jobs[s.State]++
		}
		for _, g := range s.Groups {
			q.Tasks.Count += g.Count
			q.Tasks.Pending += g.Pending
			q.Tasks.Retrying += g.Retrying
			q.Tasks.Active += g.Active
			q.Tasks.Succeeded += g.Succeeded
			q.Tasks.Failed += g.Failed
			q.Tasks.Killed += g.Killed
		}
	}
	for _, s := range h.f.Jobs(JobFilter{History: NoHistory}) {
		add(s, false)
	}
	h.f.mu.RLock()
	for j := range h.f.mu.jobs.all() {
		if j.owner() != nil {
			add(j.status(), true)
		}
	}
	for name, used := range h.f.mu.queueUsed {
		if q := want[name]; q != nil {
			q.Used = used
		}
	}
	h.f.mu.RUnlock()
	byName := func(a, b QueueCount) int { return strings.Compare(a.Name, b.Name) }
	// Chunks of every size up to 3 and the default: each crosses the
	// boundaries of the others.
	whole := h.f.census(math.MaxInt)
	for _, chunk := range []int{1, 2, 3, queueCountChunk} {
		if got := h.f.census(chunk); !reflect.DeepEqual(got, whole) {
			return fmt.Errorf("census(%d) = %+v, a whole walk %+v", chunk, got, whole)
		}
		got := h.f.queueCounts(chunk)
		if len(got) != len(want) || !slices.IsSortedFunc(got, byName) {
			return fmt.Errorf("queueCounts(%d) lists %d queues (sorted: %v), the jobs are in %d", chunk, len(got), slices.IsSortedFunc(got, byName), len(want))
		}
		for _, q := range got {
			if w := want[q.Name]; w == nil || *w != q {
				return fmt.Errorf("queueCounts(%d): queue %q is %+v, its jobs say %+v", chunk, q.Name, q, w)
			}
		}
	}
	return nil
}

// checkCapboxStates checks that every capbox moved only as api's capbox
// state machine allows since the last command.
func (h *propHarness) checkCapboxStates() error {
	if h.boxStates == nil {
		h.boxStates = map[string]api.CapboxState{}
	}
	for _, am := range h.ams {
		boxes, _, _ := h.f.Capboxes(am)
		for _, b := range boxes {
			prev, seen := h.boxStates[b.ID]
			if !seen {
				prev = api.CapboxPending
			}
			if b.State != prev {
				if err := api.CheckCapboxTransition(prev, b.State); err != nil {
					return fmt.Errorf("capbox %s: %w", b.ID, err)
				}
			}
			h.boxStates[b.ID] = b.State
		}
	}
	return nil
}

func mustJobNum(id string) uint64 {
	num, _ := parseJobID(id)
	return num
}

// inPending reports whether g is in the pending set, which must know its
// place.
func inPending(f *FSM, g *group) bool {
	gs := &f.mu.pending.gs
	return g.pendingAt > 0 && g.pendingAt <= gs.len() && *gs.at(g.pendingAt - 1) == g
}

// consume is the harness's subscriber: it follows each job's last
// change through the change sets, checking them as they come.
func (h *propHarness) consume(c *Changes) {
	bad := func(format string, args ...any) {
		if h.changesErr == nil {
			h.changesErr = fmt.Errorf(format, args...)
		}
	}
	switch c.Kind {
	case ChangeReset:
		h.changed = map[uint64]uint64{}
		js, _ := h.f.AppendJobChanges(nil)
		for _, j := range js {
			h.changed[j.Job] = j.Index
		}
		h.targets, h.gens = nil, map[string]uint64{}
		h.named, h.restarted = map[string]map[string]bool{}, map[string]bool{}
		for _, name := range h.nodes {
			h.gens[name], _ = h.f.NodeGeneration(name)
		}
	case ChangeApplied:
		if !slices.IsSorted(c.Jobs) || !slices.IsSorted(c.Forgotten) || len(slices.Compact(slices.Clone(c.Jobs))) != len(c.Jobs) {
			bad("change set at %d: jobs %v, forgotten %v, not ascending once each", c.Index, c.Jobs, c.Forgotten)
		}
		if !slices.IsSortedFunc(c.Groups, func(a, b GroupRef) int { return cmp.Or(cmp.Compare(a.Job, b.Job), cmp.Compare(a.Group, b.Group)) }) {
			bad("change set at %d: groups %v not in order", c.Index, c.Groups)
		}
		for _, g := range c.Groups {
			if _, ok := slices.BinarySearch(c.Jobs, g.Job); !ok && !slices.Contains(c.Forgotten, g.Job) {
				bad("change set at %d: group %v of a job not listed", c.Index, g)
			}
		}
		for _, b := range c.Capboxes {
			if _, ok := slices.BinarySearch(c.Jobs, b); !ok {
				bad("change set at %d: capbox set %d not among the jobs", c.Index, b)
			}
		}
		if len(slices.Compact(slices.Sorted(slices.Values(c.Nodes)))) != len(c.Nodes) {
			bad("change set at %d: nodes %v, not each once", c.Index, c.Nodes)
		}
		h.consumeTargets(c, bad)
		seen := map[TaskRef]bool{}
		for _, t := range c.Tasks {
			if seen[t] {
				bad("change set at %d: task %v twice", c.Index, t)
			}
			seen[t] = true
		}
		for _, num := range c.Jobs {
			h.changed[num] = c.Index
		}
		for _, num := range c.Forgotten {
			delete(h.changed, num)
		}
	}
}

// checkChangedSince checks that the change sets named every change of a
// job: each job's last change, as they told it, is the FSM's.
func (h *propHarness) checkChangedSince() error {
	if h.changesErr != nil {
		return h.changesErr
	}
	f := h.f
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := 0
	for j := range f.mu.jobs.all() {
		if j.forgotten || j.changed == 0 { // 0: a job of no groups, never changed
			continue
		}
		n++
		if got := h.changed[j.num]; got != j.changed {
			return fmt.Errorf("job %s: last change at %d by the change sets, %d by the FSM", j.id, got, j.changed)
		}
	}
	if n != len(h.changed) {
		return fmt.Errorf("the change sets name %d jobs, the FSM holds %d", len(h.changed), n)
	}
	return nil
}

// checkRoundInput checks that the input kept from check to check, read
// again only for the nodes that changed, is the input read whole, at a
// time up to 10 s after the last command's (cached slots expire at a
// read before a command drops them). As the dispatcher's offline estimate
// does, it then lowers some nodes' free resources in the kept input, which
// the next read must put back; now and then another input, which follows
// no change sets, is read in between, which must not disturb the kept
// one.
func (h *propHarness) checkRoundInput() error {
	at := h.now.Add(time.Duration(h.r.IntN(10_000)) * time.Millisecond)
	got := h.input.Read(h.f, at)
	want := h.v.Build(h.f, at)
	if len(got.Nodes) != len(want.Nodes) {
		return fmt.Errorf("kept input: %d nodes, whole: %d", len(got.Nodes), len(want.Nodes))
	}
	for i := range got.Nodes {
		if !reflect.DeepEqual(got.Nodes[i], want.Nodes[i]) {
			return fmt.Errorf("kept input's node %d:\n%+v\nwhole:\n%+v", i, got.Nodes[i], want.Nodes[i])
		}
	}
	same := func(a, b any) bool { return reflect.DeepEqual(a, b) }
	if !slices.EqualFunc(got.Groups, want.Groups, func(a, b placement.Group) bool { return same(a, b) }) ||
		!slices.Equal(got.Queues, want.Queues) {
		return fmt.Errorf("kept input's groups or queues differ from the whole input's")
	}
	if got.Kept {
		for i := range got.Nodes {
			if !same(got.Nodes[i], h.seen[i]) && !slices.Contains(got.Changed, int32(i)) {
				return fmt.Errorf("kept input's node %d (%s) changed since the last check but is not listed in Changed %v", i, got.Nodes[i].ID, got.Changed)
			}
		}
	}
	h.input.Placed()
	h.seen = h.seen[:0]
	for _, n := range got.Nodes {
		n.Slots = slices.Clone(n.Slots)
		n.Jobs = maps.Clone(n.Jobs)
		h.seen = append(h.seen, n)
	}
	for i := range got.Nodes {
		if h.r.IntN(4) == 0 {
			got.Nodes[i].Free.Offline = api.Capacity{}
			h.input.SetModified()
		}
	}
	if h.r.IntN(20) == 0 {
		h.v.NewKept().Read(h.f, at)
	}
	return nil
}

// consumeTargets checks a change set's target changes and generations
// against the generations told before, and notes what they name for
// checkTargetChanges.
func (h *propHarness) consumeTargets(c *Changes, bad func(string, ...any)) {
	names := map[string]bool{}
	for _, tn := range c.TargetNodes {
		if names[tn.Name] || h.f.mu.nodes[tn.Name] == nil || tn.Tasks < 0 {
			bad("change set at %d: target nodes %+v: %q twice, unknown or with %d tasks", c.Index, c.TargetNodes, tn.Name, tn.Tasks)
		}
		names[tn.Name] = true
	}
	for _, tc := range c.TargetChanges {
		if tc.Node < 0 || int(tc.Node) >= len(c.TargetNodes) {
			bad("change set at %d: target change %+v of node %d, of %d", c.Index, tc, tc.Node, len(c.TargetNodes))
			return
		}
		node := c.TargetNodes[tc.Node].Name
		if want := h.gens[node] + 1; tc.Gen != want {
			bad("change set at %d: target change %+v of %s journaled under generation %d, want %d", c.Index, tc, node, tc.Gen, want)
		}
		if tc.Restart {
			h.restarted[node] = true
			continue
		}
		if h.named[node] == nil {
			h.named[node] = map[string]bool{}
		}
		h.named[node][taskID(taskKey{tc.Job, tc.Group, tc.Index}, tc.Attempt)] = true
	}
	if len(c.TargetGens) != len(c.Targets) {
		bad("change set at %d: %d targets, %d generations", c.Index, len(c.Targets), len(c.TargetGens))
		return
	}
	for i, name := range c.Targets {
		if want := h.gens[name] + 1; c.TargetGens[i] != want {
			bad("change set at %d: node %s moved to generation %d, want %d", c.Index, name, c.TargetGens[i], want)
		}
		h.gens[name] = c.TargetGens[i]
	}
}

// checkTargetChanges checks the change sets' target changes against
// NodeTarget: each node's generation is the one they told, and every pod
// that entered, left or changed in a node's target since the last check
// is named by a target change of the node, or its journal restarted.
func (h *propHarness) checkTargetChanges() error {
	if h.changesErr != nil {
		return h.changesErr
	}
	first := h.targets == nil
	if first {
		h.targets = map[string]map[string]api.TargetPod{}
	}
	for _, name := range h.nodes {
		gen, pods, ok := h.f.NodeTarget(name)
		if !ok {
			continue
		}
		if gen != h.gens[name] {
			return fmt.Errorf("node %s: generation %d, the change sets told %d", name, gen, h.gens[name])
		}
		now := map[string]api.TargetPod{}
		for _, p := range pods {
			now[p.TaskID] = p
		}
		then, seen := h.targets[name]
		h.targets[name] = now
		if first || !seen || h.restarted[name] {
			continue
		}
		ids := maps.Clone(then)
		maps.Copy(ids, now)
		for _, id := range slices.Sorted(maps.Keys(ids)) {
			a, inThen := then[id]
			b, inNow := now[id]
			if inThen == inNow && reflect.DeepEqual(a, b) {
				continue
			}
			if !h.named[name][id] {
				return fmt.Errorf("node %s: pod %s changed (in the target before %v, now %v, generation %d), not named by a target change", name, id, inThen, inNow, gen)
			}
			h.targetDiffs++
		}
	}
	clear(h.named)
	clear(h.restarted)
	return nil
}

// checkHistory checks, under f's read lock, that the summaries in memory
// are those the store holds, in number order and, apart, in end order,
// and that none is of a job not forgotten.
func checkHistory(f *FSM, s *memStore, bad func(string, ...any)) {
	h := &f.mu.history
	var stored []uint64
	for k := range s.m {
		if strings.HasPrefix(k, prefixHistory) {
			stored = append(stored, binary.BigEndian.Uint64([]byte(k[len(prefixHistory):])))
		}
	}
	slices.Sort(stored)
	var mem []uint64
	for i, x := range h.byNum {
		mem = append(mem, x.num)
		if i > 0 && h.byNum[i-1].num >= x.num || f.mu.jobs.get(x.num) != nil {
			bad("summary of j%d out of order or of a live job", x.num)
		}
		if string(s.m[string(numKey(prefixHistory, x.num))]) != x.rec {
			bad("summary of j%d differs from its record", x.num)
		}
	}
	if !slices.Equal(stored, mem) {
		bad("summaries stored %v, in memory %v", stored, mem)
	}
	if len(h.byEnd) != len(h.byNum) || !slices.IsSortedFunc(h.byEnd, cmpHistEnd) {
		bad("summaries by end %v, not the %d by number in order", h.byEnd, len(h.byNum))
	}
	for _, e := range h.byEnd {
		if i, ok := h.find(e.num); !ok || h.byNum[i].ended != e.ended {
			bad("summary of j%d by end ended %d, not as by number", e.num, e.ended)
		}
	}
}

// checkForgotten checks, under f's read lock, what forgetting jobs keeps
// in step: the finished queue holds every finished job not forgotten,
// once; idempotency keys and their jobs name each other; each submit
// record counts its live jobs; and the store holds no record of a
// forgotten job (a submit record stays while it holds a live one).
func checkForgotten(f *FSM, s *memStore, bad func(string, ...any)) {
	queued := map[*job]int{}
	q := &f.mu.finished
	for _, j := range q.jobs[q.head:] {
		queued[j]++
		if j.ended == 0 || !j.forgotten && (!finished(j) || f.mu.jobs.get(j.num) != j) {
			bad("finished queue holds %s, which is not finished or not in the table", j.id)
		}
	}
	live := map[*submitRecord]int{}
	for j := range f.mu.jobs.all() {
		if finished(j) != (queued[j] == 1) || finished(j) != (j.ended != 0) {
			bad("job %s finished=%v ended=%d, in the finished queue %d times", j.id, finished(j), j.ended, queued[j])
		}
		if j.idem != "" && f.mu.idem[j.idem] != j.num {
			bad("job %s has idempotency key %q, which names job %d", j.id, j.idem, f.mu.idem[j.idem])
		}
		if j.sub != nil {
			live[j.sub]++
		}
	}
	for k, num := range f.mu.idem {
		if j := f.mu.jobs.get(num); j == nil || j.idem != k {
			bad("idempotency key %q names job %d, which does not hold it", k, num)
		}
	}
	for sub, n := range live {
		if sub.live != n {
			bad("submit record of job %d counts %d live jobs, the table holds %d", sub.first, sub.live, n)
		}
	}
	for k := range s.m {
		for _, p := range []string{prefixJob, prefixCapboxSet, prefixGroup, prefixTask, prefixCapTask} {
			if strings.HasPrefix(k, p) && len(k) >= len(p)+8 {
				if num := binary.BigEndian.Uint64([]byte(k[len(p):])); f.mu.jobs.get(num) == nil {
					bad("record %q of forgotten job %d", k, num)
				}
			}
		}
	}
}
