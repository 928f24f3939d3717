package fsm_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/jobfeed"
	"github.com/sluicehq/sluice/dispatcher/roundinput"
	"github.com/sluicehq/sluice/raftkv"
)

// replica is a single-replica raftkv cluster on disk applying an FSM.
type replica struct {
	t   *testing.T
	dir string
	kv  *raftkv.Node
	f   *fsm.FSM
	// feed is a watch feed over f's change sets.
	feed *jobfeed.Feed
	// targets lists the node targets f's change sets said changed, and
	// the index of each change.
	targetsMu sync.Mutex
	targets   []indexedNode
	now       time.Time
	// mark is an applied index the script remembered.
	mark uint64
	// slotTTL is what reports cache ended tasks' slots for.
	slotTTL time.Duration
}

// indexedNode is a node named by the change set at index.
type indexedNode struct {
	index uint64
	node  string
}

func openReplica(t *testing.T, dir string) *replica {
	t.Helper()
	r := &replica{t: t, dir: dir, f: fsm.New(), now: time.Unix(1_800_000_000, 0)}
	kv, err := raftkv.Open(raftkv.Config{
		ID: 1, Dir: dir, Peers: map[uint64]string{1: "local"}, StateMachine: r.f,
		TickInterval: 5 * time.Millisecond, ElectionTicks: 4,
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	r.kv = kv
	r.feed = jobfeed.New(r.f)
	t.Cleanup(r.f.Subscribe(func(c *fsm.Changes) {
		r.feed.Consume(c)
		r.targetsMu.Lock()
		defer r.targetsMu.Unlock()
		for _, n := range c.Targets {
			r.targets = append(r.targets, indexedNode{c.Index, n})
		}
	}))
	deadline := time.Now().Add(5 * time.Second)
	for !kv.Status().IsLeader {
		if time.Now().After(deadline) {
			t.Fatal("no leader within 5s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Cleanup(func() { r.close() })
	return r
}

func (r *replica) close() {
	if r.kv != nil {
		if err := r.kv.Close(); err != nil {
			r.t.Errorf("close: %v", err)
		}
		r.kv = nil
	}
}

func (r *replica) propose(cmd []byte) ([]byte, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.kv.Propose(ctx, cmd)
}

// exec runs one script line and returns its outcome as text.
func (r *replica) exec(line string) string {
	r.t.Helper()
	fields := strings.Fields(line)
	verb, args := fields[0], fields[1:]
	var cmd []byte
	var decode func([]byte) string
	switch verb {
	case "slotttl": // slotttl <duration>: reports from now on cache slots this long
		d, err := time.ParseDuration(args[0])
		if err != nil {
			r.t.Fatalf("%s: %v", line, err)
		}
		r.slotTTL = d
		return "ok"
	case "slots": // slots <node>: the node's cached slots and offline free cpu, as placement sees them
		for _, n := range roundinput.Build(r.f, r.now, 0).Nodes {
			if n.ID == args[0] {
				var out []string
				for _, s := range n.Slots {
					out = append(out, fmt.Sprintf("%s:%s:%d", s.ID, s.QoS, s.Shape.CPU))
				}
				return fmt.Sprintf("[%s] free cpu=%d", strings.Join(out, " "), n.Free.Offline.CPU)
			}
		}
		return "no such ready node"
	case "advance": // advance <duration>
		d, err := time.ParseDuration(args[0])
		if err != nil {
			r.t.Fatalf("%s: %v", line, err)
		}
		r.now = r.now.Add(d)
		return "ok"
	case "node": // node <name> cpu=.. mem=.. [gpus=..] [pool=..]
		kv := opts(args[1:])
		c := api.Capacity{CPU: num(kv["cpu"]), Memory: num(kv["mem"]), GPUs: num(kv["gpus"]), Ports: 100}
		spec := api.NodeSpec{Name: args[0], Pool: kv["pool"], Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c}}
		var err error
		if cmd, err = fsm.RegisterNode(r.now, spec); err != nil {
			r.t.Fatal(err)
		}
		decode = func([]byte) string { return "ok" }
	case "submit": // submit <name> count=.. cpu=.. mem=.. [attempts=..] [key=..] [qos=..] [prio=..] [distinct] [| <next job>]
		var specs []api.JobSpec
		for _, part := range strings.Split(strings.Join(args, " "), "|") {
			specs = append(specs, jobSpec(strings.Fields(part)))
		}
		var err error
		if cmd, err = fsm.SubmitJobs(r.now, specs); err != nil {
			// Rejected before it is proposed: nothing reaches the log.
			return "error: " + err.Error()
		}
		decode = func(b []byte) string { return submitted(r.t, b) }
	case "appmaster": // appmaster <name> [count=.. cpu=.. mem=..] [prio=..]: submit an appmaster job, of no task groups without count
		spec := jobSpec(args)
		spec.Appmaster = true
		if num(opts(args[1:])["count"]) == 0 {
			spec.Tasks = nil
		}
		var err error
		if cmd, err = fsm.SubmitJobs(r.now, []api.JobSpec{spec}); err != nil {
			r.t.Fatal(err)
		}
		decode = func(b []byte) string { return submitted(r.t, b) }
	case "capboxes": // capboxes <appmaster> <name> count=.. cpu=.. mem=.. [gang] [distinct] [key=..] [| <next request>]
		var reqs []api.CapboxRequest
		for _, part := range strings.Split(strings.Join(args[1:], " "), "|") {
			f := strings.Fields(part)
			kv := opts(f[1:])
			rq := api.CapboxRequest{Name: f[0], Count: num(kv["count"]), IdempotencyKey: kv["key"],
				Resources: api.Resources{CPU: num(kv["cpu"]), Memory: num(kv["mem"])}}
			_, rq.AllOrNothing = kv["gang"]
			_, rq.DistinctNodes = kv["distinct"]
			reqs = append(reqs, rq)
		}
		var err error
		if cmd, err = fsm.CreateCapboxes(r.now, args[0], reqs); err != nil {
			r.t.Fatal(err)
		}
		decode = func(b []byte) string { return submitted(r.t, b) }
	case "release": // release <appmaster> <capbox> ...
		cmd = fsm.ReleaseCapboxes(r.now, args[0], args[1:])
		decode = func(b []byte) string {
			res, err := fsm.DecodeCancelResult(b)
			if err != nil {
				r.t.Fatal(err)
			}
			return fmt.Sprintf("dropped=%d stopping=%d", res.Dropped, res.Stopping)
		}
	case "start": // start <appmaster> <capbox>:<name>:<cpu>:<mem> ...: start capbox tasks
		var specs []api.CapTaskSpec
		for _, a := range args[1:] {
			f := strings.Split(a, ":")
			specs = append(specs, api.CapTaskSpec{Capbox: f[0], Name: f[1], Pod: api.PodSpec{Containers: []api.ContainerSpec{{
				Image: api.Image{Rootfs: "/img"}, Command: []string{"/bin/true"},
				Resources: api.Resources{CPU: num(f[2]), Memory: num(f[3])},
			}}}})
		}
		var err error
		if cmd, err = fsm.StartCapTasks(r.now, args[0], specs); err != nil {
			r.t.Fatal(err)
		}
		decode = func(b []byte) string { return submitted(r.t, b) }
	case "stop": // stop <appmaster> <capbox task> ...
		cmd = fsm.StopCapTasks(r.now, args[0], args[1:])
		decode = func(b []byte) string {
			res, err := fsm.DecodeCancelResult(b)
			if err != nil {
				r.t.Fatal(err)
			}
			return fmt.Sprintf("stopping=%d", res.Stopping)
		}
	case "boxes": // boxes <appmaster>: its capboxes and their states
		bs, _, ok := r.f.Capboxes(args[0])
		if !ok {
			return "no such job"
		}
		var out []string
		for _, b := range bs {
			s := b.ID + ":" + b.State.String()
			if b.Node != "" {
				s += "@" + b.Node
			}
			if len(b.Tasks) > 0 {
				var ts []string
				for _, t := range b.Tasks {
					ts = append(ts, t.Name+":"+t.State.String())
				}
				s += "{" + strings.Join(ts, " ") + "}"
			}
			out = append(out, s)
		}
		return "[" + strings.Join(out, " ") + "]"
	case "plan": // plan [term=N] <job>/<group>@<node>*<count> ...
		p := &fsm.Plan{Term: 1, Now: r.now}
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "term="); ok {
				p.Term = uint64(num(v))
				continue
			}
			grp, rest, _ := strings.Cut(a, "@")
			nd, cnt, _ := strings.Cut(rest, "*")
			cnt, slots, _ := strings.Cut(strings.TrimSuffix(cnt, "]"), "[")
			job, g, _ := strings.Cut(grp, "/")
			as := fsm.Assignment{Group: fsm.GroupKey{Job: job, Group: g}, Node: nd, Count: num(cnt)}
			if slots != "" {
				as.Slots = strings.Split(slots, ",")
			}
			p.Assignments = append(p.Assignments, as)
		}
		cmd = fsm.CommitPlan(p)
		decode = func(b []byte) string {
			res, err := fsm.DecodePlanResult(b)
			if err != nil {
				r.t.Fatal(err)
			}
			s := fmt.Sprintf("placed=%d", res.Placed)
			for _, x := range res.Rejected {
				s += fmt.Sprintf(" reject[%d]=%s", x.Index, strings.ReplaceAll(x.Code.String(), " ", "-"))
			}
			return s
		}
	case "preempt": // preempt [term=N] <task>@<node>:<job>/<group> ...
		term := uint64(1)
		var ps []fsm.Preemption
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "term="); ok {
				term = uint64(num(v))
				continue
			}
			tn, grp, _ := strings.Cut(a, ":")
			task, nd, _ := strings.Cut(tn, "@")
			job, g, _ := strings.Cut(grp, "/")
			ps = append(ps, fsm.Preemption{Task: task, Node: nd, For: fsm.GroupKey{Job: job, Group: g}})
		}
		cmd = fsm.PreemptTasks(r.now, term, ps)
		decode = func(b []byte) string {
			res, err := fsm.DecodePreemptResult(b)
			if err != nil {
				r.t.Fatal(err)
			}
			s := fmt.Sprintf("preempted=%d", res.Preempted)
			for _, x := range res.Rejected {
				s += fmt.Sprintf(" reject[%d]=%s", x.Index, strings.ReplaceAll(x.Code.String(), " ", "-"))
			}
			return s
		}
	case "report": // report <node> <task> <state> [reason] | ...
		var reps []fsm.Report
		for _, part := range strings.Split(strings.Join(args, " "), "|") {
			f := strings.Fields(part)
			st, err := api.ParseTaskState(f[2])
			if err != nil {
				st = api.TaskState(99)
			}
			rep := fsm.Report{Node: f[0], TaskReport: &api.TaskReport{TaskID: f[1], State: st, Reason: api.ReasonExited, Time: r.now}}
			if len(f) > 3 {
				rep.Reason = api.TaskReason(f[3])
			}
			reps = append(reps, rep)
		}
		cmd = fsm.UpdateTasksCaching(r.now, reps, r.slotTTL)
		decode = func(b []byte) string {
			res, err := fsm.DecodeUpdateResult(b)
			if err != nil {
				r.t.Fatal(err)
			}
			return fmt.Sprintf("applied=%d noop=%d stale=%d requeued=%d", res.Applied, res.NoOp, res.Stale, res.Requeued)
		}
	case "state": // state <node> <ready|draining|down>
		cmd = fsm.SetNodeState(r.now, args[0], api.NodeState(args[1]))
		decode = func(b []byte) string {
			res, err := fsm.DecodeNodeStateResult(b)
			if err != nil {
				r.t.Fatal(err)
			}
			return fmt.Sprintf("lost=%d requeued=%d", res.Lost, res.Requeued)
		}
	case "drain", "undrain", "enddrain": // drain <node> [deadline, from now]; undrain <node>; enddrain <node>
		switch verb {
		case "drain":
			var deadline time.Time
			if len(args) > 1 {
				d, err := time.ParseDuration(args[1])
				if err != nil {
					r.t.Fatalf("%s: %v", line, err)
				}
				deadline = r.now.Add(d)
			}
			cmd = fsm.DrainNode(r.now, args[0], deadline)
		case "undrain":
			cmd = fsm.UndrainNode(r.now, args[0])
		default:
			cmd = fsm.EndDrain(r.now, args[0])
		}
		decode = func(b []byte) string {
			res, err := fsm.DecodeDrainResult(b)
			if err != nil {
				r.t.Fatal(err)
			}
			return fmt.Sprintf("%s tasks=%d stopped=%d requeued=%d", res.State, res.Tasks, res.Stopped, res.Requeued)
		}
	case "remove": // remove <node>
		cmd = fsm.RemoveNode(r.now, args[0])
		decode = func([]byte) string { return "ok" }
	case "nodes": // nodes: each node's name, state, drain deadline (from now) and tasks
		var out []string
		for _, n := range r.f.Nodes() {
			s := fmt.Sprintf("%s:%s:%d", n.Spec.Name, n.State, n.Tasks)
			if n.Drained {
				s += ":drained"
			}
			if !n.DrainDeadline.IsZero() {
				s += "@" + n.DrainDeadline.Sub(r.now).String()
			}
			out = append(out, s)
		}
		return fmt.Sprint(out)
	case "cancel":
		cmd = fsm.CancelJob(r.now, args[0])
		decode = func(b []byte) string {
			res, err := fsm.DecodeCancelResult(b)
			if err != nil {
				r.t.Fatal(err)
			}
			return fmt.Sprintf("dropped=%d stopping=%d", res.Dropped, res.Stopping)
		}
	case "forget": // forget <job> ...
		cmd = fsm.ForgetJobs(r.now, args)
		decode = func(b []byte) string {
			res, err := fsm.DecodeForgetResult(b)
			if err != nil {
				r.t.Fatal(err)
			}
			return fmt.Sprintf("forgotten=%d kept=%d", res.Forgotten, res.Kept)
		}
	case "forgettable": // forgettable <duration>: the jobs finished by that long ago
		d, err := time.ParseDuration(args[0])
		if err != nil {
			r.t.Fatalf("%s: %v", line, err)
		}
		return fmt.Sprint(r.f.Forgettable(r.now.Add(-d), 100))
	case "job": // job <id>: state and counts
		j, ok := r.f.Job(args[0])
		if !ok {
			return "no such job"
		}
		if len(j.Groups) == 0 {
			return j.State.String() + " no groups"
		}
		g := j.Groups[0]
		return fmt.Sprintf("%s pending=%d active=%d ok=%d failed=%d killed=%d", j.State, g.Pending, g.Active, g.Succeeded, g.Failed, g.Killed)
	case "tasks": // tasks <job> [after=<task>] [limit=N]: the job's placed tasks
		kv := opts(args[1:])
		ts, ok := r.f.JobTasks(args[0], kv["after"], int(num(kv["limit"])))
		if !ok {
			return "no such job"
		}
		var out []string
		for _, t := range ts {
			out = append(out, fmt.Sprintf("%s:%s@%s", t.ID, t.State, t.Node))
		}
		return "[" + strings.Join(out, " ") + "]"
	case "mark": // mark: remember the applied index, for changed
		r.mark = r.f.Applied()
		return "ok"
	case "changed": // changed <0|mark> [limit=N]: jobs changed after index 0 or the mark
		var from uint64
		if args[0] == "mark" {
			from = r.mark
		}
		js, applied := r.feed.JobsChangedSince(from, int(num(opts(args[1:])["limit"])))
		var out []string
		for _, j := range js {
			if j.Changed <= from || j.Changed > applied {
				r.t.Fatalf("%s: job %s changed at %d, outside (%d, %d]", line, j.ID, j.Changed, from, applied)
			}
			out = append(out, j.ID+":"+j.State.String())
		}
		return "[" + strings.Join(out, " ") + "]"
	case "changednodes": // changednodes: the nodes whose target changed since the mark
		var nodes []string
		r.targetsMu.Lock()
		for _, n := range r.targets {
			if n.index > r.mark {
				nodes = append(nodes, n.node)
			}
		}
		r.targetsMu.Unlock()
		return "[" + strings.Join(nodes, " ") + "]"
	case "target": // target <node>: generation and pods
		gen, pods, ok := r.f.NodeTarget(args[0])
		if g, known := r.f.NodeGeneration(args[0]); known != ok || g != gen {
			r.t.Fatalf("%s: NodeGeneration = %d, %v; NodeTarget's = %d, %v", line, g, known, gen, ok)
		}
		if !ok {
			return "no such node"
		}
		s := fmt.Sprintf("gen=%d", gen)
		for _, p := range pods {
			// Every pod, a capbox task's too, names its job's name and
			// its group's count.
			j, ok := r.f.Job(p.Job)
			if !ok {
				r.t.Fatalf("%s: pod %s of unknown job %s", line, p.TaskID, p.Job)
			}
			i := slices.IndexFunc(j.Spec.Tasks, func(g api.TaskGroupSpec) bool { return g.Name == p.Group })
			if i < 0 || p.JobName != j.Spec.Name || p.Count != j.Spec.Tasks[i].Count {
				r.t.Fatalf("%s: pod %s: job name %q, group %q, count %d; the job's spec %+v", line, p.TaskID, p.JobName, p.Group, p.Count, j.Spec)
			}
			s += " " + p.TaskID
			if p.Capbox {
				s += "(capbox)"
			}
		}
		return s
	case "releasing": // releasing <node>: offline cpu and memory held by tasks told to stop
		for _, n := range r.f.Nodes() {
			if n.Spec.Name == args[0] {
				return fmt.Sprintf("cpu=%d mem=%d", n.Releasing.Offline.CPU, n.Releasing.Offline.Memory)
			}
		}
		return "no such node"
	case "free": // free <node>: offline cpu and memory left
		for _, n := range r.f.Nodes() {
			if n.Spec.Name == args[0] {
				return fmt.Sprintf("cpu=%d mem=%d %s", n.Free.Offline.CPU, n.Free.Offline.Memory, n.State)
			}
		}
		return "no such node"
	case "input": // input: the placement input's groups
		in := roundinput.Build(r.f, r.now, 0)
		var out []string
		for _, g := range in.Groups {
			out = append(out, fmt.Sprintf("%s:%d", g.Key, g.Pending))
		}
		return fmt.Sprintf("nodes=%d groups=%v", len(in.Nodes), out)
	default:
		r.t.Fatalf("unknown script verb %q", verb)
	}
	before := fsm.Dump(r.f)
	res, err := r.propose(cmd)
	if err != nil {
		if after := fsm.Dump(r.f); after != before {
			r.t.Fatalf("%s: rejected (%v) but the state changed:\nbefore:\n%s\nafter:\n%s", line, err, before, after)
		}
		return "error: " + err.Error()
	}
	return decode(res)
}

// submitted formats a submit result: the IDs, each marked when existing.
func submitted(t *testing.T, b []byte) string {
	t.Helper()
	res, err := fsm.DecodeSubmitResult(b)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range res.Jobs {
		s := j.ID
		if j.Existing {
			s += "(existing)"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func opts(args []string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		m[k] = v
	}
	return m
}

func num(s string) int64 {
	if s == "" {
		return 0
	}
	mult := int64(1)
	if v, ok := strings.CutSuffix(s, "Gi"); ok {
		s, mult = v, 1<<30
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return n * mult
}

func jobSpec(args []string) api.JobSpec {
	kv := opts(args[1:])
	s := api.JobSpec{Name: args[0], IdempotencyKey: kv["key"], QoS: api.QoS(kv["qos"]), Priority: int32(num(kv["prio"]))}
	s.Retry.MaxAttempts = int32(num(kv["attempts"]))
	_, s.DistinctNodes = kv["distinct"]
	s.Tasks = []api.TaskGroupSpec{{Count: num(kv["count"]), Pod: api.PodSpec{Containers: []api.ContainerSpec{{
		Image: api.Image{Rootfs: "/img"}, Command: []string{"/bin/true"},
		Resources: api.Resources{CPU: num(kv["cpu"]), Memory: num(kv["mem"])},
	}}}}}
	return s
}

// Each script is lines of "command => want"; a want ending in "..." matches
// as a prefix. After the script the replica restarts and must load the same
// state.
var scripts = []struct {
	name   string
	script string
}{
	{"lifecycle", `
node n1 cpu=4000 mem=8Gi => ok
submit a count=3 cpu=1000 mem=1Gi => j1
job j1 => pending pending=3 active=0 ok=0 failed=0 killed=0
input => nodes=1 groups=[j1/g0:3]
plan j1/g0@n1*2 => placed=2
target n1 => gen=1 j1/0/0/1 j1/0/1/1
free n1 => cpu=2000 mem=6442450944 ready
job j1 => running pending=1 active=2 ok=0 failed=0 killed=0
plan j1/g0@n1*1 => placed=1
report n1 j1/0/0/1 running started | n1 j1/0/0/1 succeeded => applied=2 noop=0 stale=0 requeued=0
report n1 j1/0/0/1 succeeded => applied=0 noop=1 stale=0 requeued=0
report n1 j1/0/0/1 running started => applied=0 noop=0 stale=1 requeued=0
report n1 j1/0/1/1 starting started | n1 j1/0/1/1 running started | n1 j1/0/2/1 running started => applied=3 noop=0 stale=0 requeued=0
target n1 => gen=2 j1/0/1/1 j1/0/2/1
report n1 j1/0/1/1 succeeded | n1 j1/0/2/1 succeeded => applied=2 noop=0 stale=0 requeued=0
target n1 => gen=2
job j1 => succeeded pending=0 active=0 ok=3 failed=0 killed=0
free n1 => cpu=4000 mem=8589934592 ready
input => nodes=1 groups=[]
`},
	{"tasks and changes", `
node n1 cpu=4000 mem=8Gi => ok
submit a count=3 cpu=1000 mem=1Gi attempts=2 => j1
submit b count=1 cpu=1000 mem=1Gi => j2
tasks j1 => []
tasks j9 => no such job
changed 0 => [j1:pending j2:pending]
mark => ok
changednodes => []
plan j2/g0@n1*1 j1/g0@n1*2 => placed=3
changednodes => [n1]
changed mark => [j1:running j2:running]
changed mark limit=1 => [j1:running]
mark => ok
report n1 j1/0/1/1 failed => applied=1 noop=0 stale=0 requeued=1
changed mark => [j1:running]
mark => ok
changed mark => []
tasks j1 => [j1/0/0/1:assigned@n1 j1/0/1/1:failed@n1]
tasks j1 limit=1 => [j1/0/0/1:assigned@n1]
tasks j1 after=j1/0/0/1 => [j1/0/1/1:failed@n1]
tasks j1 after=j1/0/0/7 => [j1/0/1/1:failed@n1]
tasks j1 after=j1/0/1/1 => []
tasks j1 after=junk => [j1/0/0/1:assigned@n1 j1/0/1/1:failed@n1]
`},
	{"retries", `
node n1 cpu=4000 mem=8Gi => ok
submit a count=1 cpu=1000 mem=1Gi attempts=2 => j1
plan j1/g0@n1*1 => placed=1
report n1 j1/0/0/1 running started | n1 j1/0/0/1 failed => applied=2 noop=0 stale=0 requeued=1
report n1 j1/0/0/1 failed => applied=0 noop=1 stale=0 requeued=0
job j1 => running pending=1 active=0 ok=0 failed=0 killed=0
input => nodes=1 groups=[]
plan j1/g0@n1*1 => placed=0 reject[0]=not-enough-pending-tasks
advance 2s => ok
input => nodes=1 groups=[j1/g0:1]
plan j1/g0@n1*1 => placed=1
target n1 => gen=2 j1/0/0/2
report n1 j1/0/0/1 running => applied=0 noop=0 stale=1 requeued=0
report n1 j1/0/0/2 failed => applied=1 noop=0 stale=0 requeued=0
job j1 => failed pending=0 active=0 ok=0 failed=1 killed=0
`},
	{"time limit", `
node n1 cpu=4000 mem=8Gi => ok
submit a count=2 cpu=1000 mem=1Gi attempts=3 => j1
plan j1/g0@n1*2 => placed=2
report n1 j1/0/0/1 running started | n1 j1/0/1/1 running started => applied=2 noop=0 stale=0 requeued=0
report n1 j1/0/0/1 killed time_limit => applied=1 noop=0 stale=0 requeued=0
report n1 j1/0/1/1 killed memory_killer => applied=1 noop=0 stale=0 requeued=1
job j1 => running pending=1 active=0 ok=0 failed=0 killed=1
`},
	{"preemption", `
node n1 cpu=4000 mem=8Gi => ok
submit lo count=3 cpu=1000 mem=1Gi attempts=1 prio=1 => j1
submit on count=1 cpu=1000 mem=1Gi prio=0 qos=online => j2
submit hi count=2 cpu=2000 mem=1Gi prio=5 => j3
submit eq count=1 cpu=1000 mem=1Gi prio=1 => j4
plan j1/g0@n1*3 j2/g0@n1*1 => placed=4
report n1 j1/0/0/1 running started | n1 j1/0/1/1 running started => applied=2 noop=0 stale=0 requeued=0
preempt j1/0/0/1@n1:j3/g0 j1/0/0/1@n1:j3/g0 j1/0/1/7@n1:j3/g0 j1/0/1/1@n2:j3/g0 j1/0/1/1@n1:j4/g0 j2/0/0/1@n1:j3/g0 j1/0/1/1@n1:j9/g0 j1/0/1/1@n1:j3/g7 => preempted=1 reject[1]=task-not-active reject[2]=task-not-found reject[3]=task-not-found reject[4]=priority reject[5]=priority reject[6]=job-not-found reject[7]=group-not-found
target n1 => gen=2 j1/0/1/1 j1/0/2/1 j2/0/0/1
releasing n1 => cpu=1000 mem=1073741824
free n1 => cpu=1000 mem=5368709120 ready
preempt term=1 j1/0/1/1@n1:j3/g0 => preempted=1
plan term=2 j4/g0@n1*0 => placed=0 reject[0]=bad-count
preempt term=1 j1/0/2/1@n1:j3/g0 => error: ...older term...
report n1 j1/0/0/1 killed stopped | n1 j1/0/1/1 killed stopped => applied=2 noop=0 stale=0 requeued=2
releasing n1 => cpu=0 mem=0
free n1 => cpu=3000 mem=7516192768 ready
job j1 => running pending=2 active=1 ok=0 failed=0 killed=0
tasks j1 => [j1/0/0/1:killed@n1 j1/0/1/1:killed@n1 j1/0/2/1:assigned@n1]
plan term=2 j3/g0@n1*1 j1/g0@n1*2 => placed=1 reject[1]=does-not-fit
tasks j1 => [j1/0/0/1:killed@n1 j1/0/1/1:killed@n1 j1/0/2/1:assigned@n1]
`},
	{"cached slots", `
node n1 cpu=4000 mem=8Gi => ok
node n2 cpu=4000 mem=8Gi => ok
submit a count=3 cpu=1000 mem=1Gi => j1
submit b count=2 cpu=1000 mem=1Gi => j2
submit c count=1 cpu=2000 mem=1Gi => j3
submit on count=1 cpu=1000 mem=1Gi qos=online => j4
plan j1/g0@n1*3 j4/g0@n2*1 => placed=4
slotttl 10s => ok
report n1 j1/0/0/1 running | n1 j1/0/0/1 succeeded | n1 j1/0/1/1 running | n1 j1/0/1/1 failed | n2 j4/0/0/1 running | n2 j4/0/0/1 succeeded => applied=6 noop=0 stale=0 requeued=1
slots n1 => [s1:offline:1000 s2:offline:1000] free cpu=1000
slots n2 => [s3:online:1000] free cpu=4000
plan j3/g0@n1*1 => placed=0 reject[0]=does-not-fit
plan j2/g0@n1*1[s9] j2/g0@n1*1[s3] j3/g0@n1*1[s1] j2/g0@n1*1[s1,s1] j2/g0@n1*1[s1,s2] => placed=0 reject[0]=slot-not-found reject[1]=slot-not-found reject[2]=slot-not-found reject[3]=slot-not-found reject[4]=slot-not-found
plan j2/g0@n1*2[s2] => placed=2
slots n1 => [s1:offline:1000] free cpu=0
advance 10s => ok
slots n1 => [] free cpu=1000
plan j3/g0@n1*1 => placed=0 reject[0]=does-not-fit
report n1 j1/0/2/1 killed stopped => applied=1 noop=0 stale=0 requeued=0
slots n1 => [] free cpu=2000
plan j3/g0@n1*1 => placed=1
slotttl 1h => ok
report n1 j2/0/0/1 running | n1 j2/0/0/1 succeeded => applied=2 noop=0 stale=0 requeued=0
slots n1 => [s4:offline:1000] free cpu=0
state n1 down => lost=2 requeued=2
state n1 ready => lost=0 requeued=0
slots n1 => [] free cpu=4000
`},
	{"node down", `
node n1 cpu=4000 mem=8Gi => ok
node n2 cpu=4000 mem=8Gi => ok
submit a count=3 cpu=1000 mem=1Gi attempts=3 => j1
submit b count=1 cpu=1000 mem=1Gi attempts=1 => j2
plan j1/g0@n1*3 j2/g0@n1*1 => placed=4
state n1 down => lost=4 requeued=3
target n1 => gen=2
free n1 => cpu=4000 mem=8589934592 down
job j1 => running pending=3 active=0 ok=0 failed=0 killed=0
job j2 => failed pending=0 active=0 ok=0 failed=1 killed=0
report n1 j1/0/0/1 running => applied=0 noop=0 stale=1 requeued=0
advance 1s => ok
plan j1/g0@n1*1 j1/g0@n2*3 => placed=3 reject[0]=node-not-ready
target n2 => gen=1 j1/0/0/2 j1/0/1/2 j1/0/2/2
node n1 cpu=4000 mem=8Gi => ok
free n1 => cpu=4000 mem=8589934592 ready
`},
	{"cancel", `
node n1 cpu=4000 mem=8Gi => ok
submit a count=5 cpu=1000 mem=1Gi => j1
plan j1/g0@n1*2 => placed=2
cancel j1 => dropped=3 stopping=2
cancel j1 => dropped=0 stopping=0
job j1 => cancelled pending=0 active=2 ok=0 failed=0 killed=3
target n1 => gen=2
free n1 => cpu=2000 mem=6442450944 ready
plan j1/g0@n1*1 => placed=0 reject[0]=job-cancelled
report n1 j1/0/0/1 killed stopped | n1 j1/0/1/1 running | n1 j1/0/1/1 succeeded => applied=3 noop=0 stale=0 requeued=0
job j1 => cancelled pending=0 active=0 ok=1 failed=0 killed=4
free n1 => cpu=4000 mem=8589934592 ready
cancel j9 => error: ...not found: job "j9"
`},
	{"stale plan", `
node n1 cpu=2000 mem=4Gi => ok
node n2 cpu=8000 mem=4Gi gpus=1 => ok
submit a count=4 cpu=1000 mem=1Gi => j1
submit d count=2 cpu=1000 mem=1Gi distinct => j2
plan term=3 j1/g0@n1*3 j1/g0@n1*2 j1/g0@n9*1 j9/g0@n1*1 j1/g7@n1*1 j1/g0@n2*0 j1/g0@n2*5 j1/g0@n2*2 => placed=4 reject[0]=does-not-fit reject[2]=node-not-found reject[3]=job-not-found reject[4]=group-not-found reject[5]=bad-count reject[6]=not-enough-pending-tasks
plan term=3 j2/g0@n2*2 j2/g0@n2*1 j2/g0@n2*1 => placed=1 reject[0]=distinct-nodes reject[2]=distinct-nodes
plan term=2 j2/g0@n1*1 => error: ...plan from an older term...
state n2 draining => lost=0 requeued=0
plan term=3 j2/g0@n2*1 => placed=0 reject[0]=node-not-ready
job j1 => running pending=0 active=4 ok=0 failed=0 killed=0
`},
	{"drain", `
node n1 cpu=4000 mem=8Gi => ok
node n2 cpu=4000 mem=8Gi => ok
submit a count=3 cpu=1000 mem=1Gi attempts=1 => j1
plan j1/g0@n1*2 j1/g0@n2*1 => placed=3
report n1 j1/0/0/1 running started | n1 j1/0/1/1 running started => applied=2 noop=0 stale=0 requeued=0
drain n1 10s => draining tasks=2 stopped=0 requeued=0
nodes => [n1:draining:2:drained@10s n2:ready:1]
input => nodes=1 groups=[]
submit b count=1 cpu=1000 mem=1Gi => j2
plan j2/g0@n1*1 => placed=0 reject[0]=node-not-ready
node n1 cpu=4000 mem=8Gi => ok
nodes => [n1:draining:2:drained@10s n2:ready:1]
enddrain n1 => draining tasks=2 stopped=0 requeued=0
advance 10s => ok
enddrain n1 => draining tasks=0 stopped=2 requeued=2
tasks j1 => [j1/0/0/1:lost@n1 j1/0/1/1:lost@n1 j1/0/2/1:assigned@n2]
job j1 => running pending=2 active=1 ok=0 failed=0 killed=0
target n1 => gen=2
free n1 => cpu=4000 mem=8589934592 draining
input => nodes=1 groups=[j1/g0:2 j2/g0:1]
plan j1/g0@n2*2 => placed=2
tasks j1 => [j1/0/0/2:assigned@n2 j1/0/1/2:assigned@n2 j1/0/2/1:assigned@n2]
enddrain n1 => draining tasks=0 stopped=0 requeued=0
state n1 down => lost=0 requeued=0
state n1 ready => lost=0 requeued=0
nodes => [n1:draining:0:drained@0s n2:ready:3]
undrain n1 => ready tasks=0 stopped=0 requeued=0
undrain n1 => ready tasks=0 stopped=0 requeued=0
nodes => [n1:ready:0 n2:ready:3]
plan j2/g0@n1*1 => placed=1
drain n2 => draining tasks=3 stopped=0 requeued=0
drain n2 -1s => draining tasks=0 stopped=3 requeued=3
drain n2 1h => draining tasks=0 stopped=0 requeued=0
state n2 down => lost=0 requeued=0
nodes => [n1:ready:1 n2:down:0:drained@1h0m0s]
drain n9 => error: ...not found: node "n9"
undrain n9 => error: ...not found: node "n9"
enddrain n9 => error: ...not found: node "n9"
`},
	{"remove", `
node n1 cpu=4000 mem=8Gi => ok
node n2 cpu=4000 mem=8Gi => ok
node n3 cpu=4000 mem=8Gi => ok
submit a count=1 cpu=1000 mem=1Gi => j1
plan j1/g0@n1*1 => placed=1
remove n1 => error: ...node busy: node "n1" is ready: drain it first
drain n1 => draining tasks=1 stopped=0 requeued=0
remove n1 => error: ...node busy: node "n1" has 1 active tasks...
report n1 j1/0/0/1 running started | n1 j1/0/0/1 succeeded => applied=2 noop=0 stale=0 requeued=0
remove n1 => ok
remove n1 => error: ...not found: node "n1"
nodes => [n2:ready:0 n3:ready:0]
target n1 => no such node
tasks j1 => [j1/0/0/1:succeeded@n1]
state n2 down => lost=0 requeued=0
remove n2 => ok
node n1 cpu=2000 mem=4Gi => ok
nodes => [n1:ready:0 n3:ready:0]
free n1 => cpu=2000 mem=4294967296 ready
submit b count=2 cpu=1000 mem=1Gi => j2
input => nodes=2 groups=[j2/g0:2]
plan j2/g0@n1*1 j2/g0@n3*1 => placed=2
`},
	{"capboxes", `
node n1 cpu=4000 mem=8Gi => ok
node n2 cpu=4000 mem=8Gi => ok
appmaster am => j1
job j1 => running no groups
capboxes j1 workers count=3 cpu=1000 mem=1Gi | ps count=2 cpu=500 mem=1Gi gang key=k => j2 j3
capboxes j1 again count=2 cpu=500 mem=1Gi key=k => j3(existing)
boxes j1 => [j2/0/0/1:pending j2/0/1/1:pending j2/0/2/1:pending j3/0/0/1:pending j3/0/1/1:pending]
input => nodes=2 groups=[j2/workers:3 j3/ps:2]
plan j2/workers@n1*2 j3/ps@n2*2 => placed=4
target n1 => gen=1 j2/0/0/1(capbox) j2/0/1/1(capbox)
free n1 => cpu=2000 mem=6442450944 ready
report n1 j2/0/0/1 running | n2 j3/0/0/1 starting => applied=2 noop=0 stale=0 requeued=0
boxes j1 => [j2/0/0/1:running@n1 j2/0/1/1:assigned@n1 j2/0/2/1:pending j3/0/0/1:starting@n2 j3/0/1/1:assigned@n2]
release j1 j2/0/0/1 j2/0/2/1 j2/0/0/1 => dropped=1 stopping=1
boxes j1 => [j2/0/0/1:running@n1 j2/0/1/1:assigned@n1 j2/0/2/1:released j3/0/0/1:starting@n2 j3/0/1/1:assigned@n2]
target n1 => gen=2 j2/0/1/1(capbox)
releasing n1 => cpu=1000 mem=1073741824
report n1 j2/0/0/1 killed stopped => applied=1 noop=0 stale=0 requeued=0
boxes j1 => [j2/0/0/1:released@n1 j2/0/1/1:assigned@n1 j2/0/2/1:released j3/0/0/1:starting@n2 j3/0/1/1:assigned@n2]
free n1 => cpu=3000 mem=7516192768 ready
input => nodes=2 groups=[]
state n2 down => lost=2 requeued=0
boxes j1 => [j2/0/0/1:released@n1 j2/0/1/1:assigned@n1 j2/0/2/1:released j3/0/0/1:lost@n2 j3/0/1/1:lost@n2]
release j1 j1/0/0/1 => error: ...not a capbox...
release j1 j2/0/7/1 => error: ...not found...
release j1 j9/0/0/1 => error: ...not found...
release j1 j2/0/1/2 => error: ...not found...
cancel j1 => dropped=0 stopping=1
boxes j1 => [j2/0/0/1:released@n1 j2/0/1/1:assigned@n1 j2/0/2/1:released j3/0/0/1:lost@n2 j3/0/1/1:lost@n2]
target n1 => gen=4
capboxes j1 late count=1 cpu=500 mem=1Gi => error: ...appmaster has ended...
`},
	{"capbox rules", `
node n1 cpu=4000 mem=8Gi => ok
submit plain count=1 cpu=1000 mem=1Gi => j1
capboxes j1 x count=1 cpu=500 mem=1Gi => error: ...not an appmaster...
capboxes j7 x count=1 cpu=500 mem=1Gi => error: ...not found...
appmaster am count=1 cpu=1000 mem=1Gi => j2
capboxes j2 x count=0 cpu=500 mem=1Gi | y count=1 cpu=0 mem=1Gi => error: ...capboxes[0].count...capboxes[1].resources.cpu...
capboxes j2 big count=5 cpu=1000 mem=1Gi => j3
release j1 j3/0/3/1 => error: ...not found: capbox j3/0/3/1 is appmaster j2's, not j1's
release j2 j3/0/3/1 => dropped=1 stopping=0
boxes j2 => [j3/0/0/1:pending j3/0/1/1:pending j3/0/2/1:pending j3/0/3/1:released j3/0/4/1:pending]
input => nodes=1 groups=[j1/g0:1 j2/g0:1 j3/big:4]
plan j2/g0@n1*1 j3/big@n1*3 => placed=4
preempt j3/0/0/1@n1:j1/g0 => preempted=0 reject[0]=priority
boxes j2 => [j3/0/0/1:assigned@n1 j3/0/1/1:assigned@n1 j3/0/2/1:assigned@n1 j3/0/3/1:released j3/0/4/1:pending]
report n1 j2/0/0/1 running | n1 j2/0/0/1 succeeded | n1 j3/0/0/1 running => applied=3 noop=0 stale=0 requeued=0
job j2 => succeeded pending=0 active=0 ok=1 failed=0 killed=0
job j3 => cancelled pending=0 active=3 ok=0 failed=0 killed=2
target n1 => gen=2
report n1 j3/0/0/1 killed stopped | n1 j3/0/1/1 killed stopped | n1 j3/0/2/1 killed stopped => applied=3 noop=0 stale=0 requeued=0
boxes j2 => [j3/0/0/1:released@n1 j3/0/1/1:released@n1 j3/0/2/1:released@n1 j3/0/3/1:released j3/0/4/1:released]
free n1 => cpu=4000 mem=8589934592 ready
`},
	{"capbox tasks", `
node n1 cpu=4000 mem=8Gi => ok
node n2 cpu=4000 mem=8Gi => ok
appmaster am => j1
capboxes j1 w count=2 cpu=2000 mem=2Gi => j2
plan j2/w@n1*1 j2/w@n2*1 => placed=2
start j1 j2/0/0/1:t1:1000:1Gi => error: ...capbox is not running: j2/0/0/1 is assigned...
report n1 j2/0/0/1 running | n2 j2/0/1/1 running => applied=2 noop=0 stale=0 requeued=0
start j1 j2/0/0/1:t1:1000:1Gi j2/0/0/1:t2:1000:1Gi j2/0/1/1:t1:500:1Gi => j2/0/0/1/t1 j2/0/0/1/t2 j2/0/1/1/t1
start j1 j2/0/0/1:t1:1000:1Gi => j2/0/0/1/t1(existing)
start j1 j2/0/0/1:t3:1:1 => error: ...capbox has no room: j2/0/0/1: cpu: 0 free...
start j1 j2/0/1/1:t2:1000:1Gi j2/0/1/1:t3:1000:1Gi => error: ...tasks[1]: fsm: capbox has no room: j2/0/1/1: cpu: 500 free...
start j1 j9/0/0/1:t1:1:1 => error: ...has no placed capbox...
start j1 j2/0/1/1:bad/name:1:1 => error: ...tasks[0].name...
target n1 => gen=2 j2/0/0/1(capbox) j2/0/0/1/t1 j2/0/0/1/t2
boxes j1 => [j2/0/0/1:running@n1{t1:assigned t2:assigned} j2/0/1/1:running@n2{t1:assigned}]
report n1 j2/0/0/1/t1 running | n1 j2/0/0/1/t1 succeeded | n1 j2/0/0/1/t2 running | n2 j2/0/0/1/t2 running => applied=3 noop=0 stale=1 requeued=0
report n1 j2/0/0/1/t9 running => error: ...no such capbox task
report n1 j2/0/0/1/t1 pending => error: ...
start j1 j2/0/0/1:t3:1000:1Gi => j2/0/0/1/t3
stop j1 j2/0/0/1/t2 j2/0/0/1/t1 => stopping=1
stop j1 j2/0/0/1/t7 => error: ...no capbox task...
target n1 => gen=5 j2/0/0/1(capbox) j2/0/0/1/t3
report n1 j2/0/0/1/t2 killed stopped => applied=1 noop=0 stale=0 requeued=0
boxes j1 => [j2/0/0/1:running@n1{t1:succeeded t2:killed t3:assigned} j2/0/1/1:running@n2{t1:assigned}]
release j1 j2/0/0/1 => dropped=0 stopping=1
target n1 => gen=7
state n2 down => lost=1 requeued=0
boxes j1 => [j2/0/0/1:running@n1{t1:succeeded t2:killed t3:assigned} j2/0/1/1:lost@n2{t1:lost}]
report n1 j2/0/0/1/t3 killed stopped | n1 j2/0/0/1 killed stopped => applied=2 noop=0 stale=0 requeued=0
boxes j1 => [j2/0/0/1:released@n1{t1:succeeded t2:killed t3:killed} j2/0/1/1:lost@n2{t1:lost}]
free n1 => cpu=4000 mem=8589934592 ready
`},
	{"bad commands", `
node n1 cpu=4000 mem=8Gi => ok
node bad_name! cpu=4000 mem=8Gi => error: ...invalid request...
submit a count=2 cpu=1000 mem=1Gi key=k1 => j1
submit a count=2 cpu=1000 mem=1Gi key=k1 | b count=1 cpu=1000 mem=1Gi key=k2 | c count=1 cpu=1000 mem=1Gi key=k2 => j1(existing) j2 j2(existing)
submit x count=0 cpu=1000 mem=1Gi | y count=1 cpu=0 mem=1Gi => error: ...jobs[0].tasks[0].count...jobs[1].tasks[0].pod.containers[0].resources.cpu...
submit z count=1 cpu=1000 mem=1Gi => j3
plan j1/g0@n1*2 => placed=2
report n1 j1/0/0/1 running | n1 j1/0/1/1 running | n1 j1/0/0/1 pending => error: ...report 2 (task j1/0/0/1)...
report n1 j1/0/0/1 running | n1 j1/0/0/1 succeeded | n1 j1/0/0/1 failed => error: ...report 2 (task j1/0/0/1): task state succeeded -> failed not allowed
report n1 j1/0/9/1 running => error: ...no such task
report n1 garbage running => error: ...malformed task ID
state n7 down => error: ...not found...
job j1 => running pending=0 active=2 ok=0 failed=0 killed=0
`},
	// Forgetting: only finished jobs, a submit record kept (with markers)
	// while it holds a live job, an idempotency key free again; the
	// restart after the script loads the markers from pebble.
	{"forget", `
node n1 cpu=4000 mem=8Gi => ok
submit a count=1 cpu=1000 mem=1Gi key=ka | b count=1 cpu=1000 mem=1Gi | c count=1 cpu=1000 mem=1Gi => j1 j2 j3
plan j1/g0@n1*1 j2/g0@n1*1 => placed=2
forget j1 j2 j3 nonsense => forgotten=0 kept=4
report n1 j1/0/0/1 running started | n1 j1/0/0/1 succeeded => applied=2 noop=0 stale=0 requeued=0
advance 10s => ok
cancel j3 => dropped=1 stopping=0
forgettable 5s => [j1]
forgettable 0s => [j1 j3]
forget j1 => forgotten=1 kept=0
job j1 => no such job
forget j1 => forgotten=0 kept=1
submit a2 count=1 cpu=1000 mem=1Gi key=ka => j4
job j2 => running pending=0 active=1 ok=0 failed=0 killed=0
forget j3 j2 => forgotten=1 kept=1
forgettable 0s => []
`},
}

func TestScripts(t *testing.T) {
	for _, sc := range scripts {
		t.Run(sc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := openReplica(t, dir)
			for _, line := range strings.Split(strings.TrimSpace(sc.script), "\n") {
				cmd, want, ok := strings.Cut(line, " => ")
				if !ok {
					t.Fatalf("bad script line %q", line)
				}
				got := r.exec(cmd)
				if p, ok := strings.CutSuffix(want, "..."); ok && strings.HasPrefix(want, "error: ...") {
					frag := strings.TrimPrefix(p, "error: ...")
					for _, f := range strings.Split(frag, "...") {
						if !strings.Contains(got, f) {
							t.Fatalf("%s\n got: %s\nwant: %s", cmd, got, want)
						}
					}
				} else if w, ok := strings.CutPrefix(want, "error: ..."); ok {
					for _, f := range strings.Split(w, "...") {
						if !strings.Contains(got, f) || !strings.HasPrefix(got, "error: ") {
							t.Fatalf("%s\n got: %s\nwant: %s", cmd, got, want)
						}
					}
				} else if got != want {
					t.Fatalf("%s\n got: %s\nwant: %s", cmd, got, want)
				}
			}
			// Restart: Load must rebuild exactly the state Apply kept.
			before := fsm.Dump(r.f)
			r.close()
			r2 := openReplica(t, dir)
			if after := fsm.Dump(r2.f); after != before {
				t.Fatalf("state after restart differs:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}
