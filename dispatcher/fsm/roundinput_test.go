package fsm_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/dispatcher/roundinput"
)

// TestRoundInputsFollowTheirOwnChanges: two round inputs follow one FSM,
// each read again only for the nodes changed since its own last read, and
// a reset (a Load) makes the next read of each whole.
func TestRoundInputsFollowTheirOwnChanges(t *testing.T) {
	r := openReplica(t, t.TempDir())
	for i := range 3 {
		r.exec(fmt.Sprintf("node n%d cpu=4000 mem=8Gi", i))
	}
	r.exec("submit a count=2 cpu=1000 mem=1Gi")
	var a, b roundinput.Kept
	t.Cleanup(r.f.Subscribe(a.Consume))
	t.Cleanup(r.f.Subscribe(b.Consume))
	now := time.Unix(1_800_000_000, 0)
	for _, in := range []*roundinput.Kept{&a, &b} {
		if got := in.Read(r.f, now, 0); len(got.Nodes) != 3 || got.Kept {
			t.Fatalf("first read: %d nodes, kept %v", len(got.Nodes), got.Kept)
		}
		in.Placed()
	}
	r.exec("plan j1/g0@n1*1")
	if got := a.Read(r.f, now, 0); !got.Kept || !slices.Equal(got.Changed, []int32{1}) {
		t.Fatalf("a after a plan on n1: kept %v, changed %v", got.Kept, got.Changed)
	}
	a.Placed()
	r.exec("plan j1/g0@n2*1")
	if got := b.Read(r.f, now, 0); !got.Kept || !slices.Equal(got.Changed, []int32{1, 2}) {
		t.Fatalf("b after plans on n1 and n2: kept %v, changed %v", got.Kept, got.Changed)
	}
	if got := a.Read(r.f, now, 0); !got.Kept || !slices.Equal(got.Changed, []int32{2}) {
		t.Fatalf("a after the plan on n2: kept %v, changed %v", got.Kept, got.Changed)
	}
	// A node joining changes which nodes the input holds: read whole.
	r.exec("node n3 cpu=4000 mem=8Gi")
	if got := a.Read(r.f, now, 0); got.Kept || len(got.Nodes) != 4 {
		t.Fatalf("a after a node joined: kept %v, %d nodes", got.Kept, len(got.Nodes))
	}
	a.Placed()
	if err := r.f.Load(emptyStore{}); err != nil {
		t.Fatal(err)
	}
	if got := a.Read(r.f, now, 0); got.Kept || len(got.Nodes) != 0 || len(got.Groups) != 0 {
		t.Fatalf("a after a reset to an empty state: kept %v, %d nodes, %d groups", got.Kept, len(got.Nodes), len(got.Groups))
	}
}

// TestRoundInputWithoutChangeSets: a round input that follows no change
// sets reads every node every time, and so is never stale.
func TestRoundInputWithoutChangeSets(t *testing.T) {
	r := openReplica(t, t.TempDir())
	r.exec("node n0 cpu=4000 mem=8Gi")
	r.exec("submit a count=1 cpu=1000 mem=1Gi")
	var in roundinput.Kept
	now := time.Unix(1_800_000_000, 0)
	in.Read(r.f, now, 0)
	in.Placed()
	r.exec("plan j1/g0@n0*1")
	got := in.Read(r.f, now, 0)
	if got.Kept || got.Nodes[0].Free.Offline.CPU != 3000 {
		t.Fatalf("kept %v, free cpu %d, want a whole read with 3000", got.Kept, got.Nodes[0].Free.Offline.CPU)
	}
}

// TestRoundInputBoundsItsChanges: a round input not read for long (a
// follower's) keeps a bounded list of changed nodes, and past the bound
// reads every node.
func TestRoundInputBoundsItsChanges(t *testing.T) {
	r := openReplica(t, t.TempDir())
	r.exec("node n0 cpu=4000 mem=8Gi")
	var in roundinput.Kept
	t.Cleanup(r.f.Subscribe(in.Consume))
	now := time.Unix(1_800_000_000, 0)
	in.Read(r.f, now, 0)
	in.Placed()
	c := &fsm.Changes{Kind: fsm.ChangeApplied, Nodes: []string{"n0"}}
	for range 1<<16 + 1 {
		in.Consume(c)
	}
	if got := in.Read(r.f, now, 0); got.Kept {
		t.Fatalf("after %d changes: kept, changed %d", 1<<16+1, len(got.Changed))
	}
}

// BenchmarkPlacementInput reads a round's input from 10,000 nodes holding
// 50,000 placed tasks of 50 jobs, with 50 more jobs pending: the read
// every scheduling round starts with: kept from round to round as the
// scheduling loop keeps it, with no node or changed nodes changed since
// the last read (a busy round's plan and reports touch a few hundred), or
// read whole into a new roundinput.Kept.
func BenchmarkPlacementInput(b *testing.B) {
	const nodes = 10_000
	f, must, now := fsm.BenchNodes(b, nodes)
	var specs []api.JobSpec
	for i := range 100 {
		s := api.JobSpec{Name: "array", Priority: int32(i % 5), Tasks: []api.TaskGroupSpec{{Count: 1000, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
			Image: api.Image{Rootfs: "/img"}, Command: []string{"/bin/work"},
			Resources: api.Resources{CPU: 500, Memory: 1 << 30}}}}}}}
		if i%3 == 0 {
			s.QoS = api.QoSOnline
		}
		specs = append(specs, s)
	}
	must(fsm.SubmitJobs(now, specs))
	p := &fsm.Plan{Term: 1, Now: now}
	for j := range 50 {
		for k := range 100 {
			p.Assignments = append(p.Assignments, fsm.Assignment{Group: fsm.GroupKey{Job: fmt.Sprintf("j%d", 1+j), Group: "g0"},
				Node: fmt.Sprintf("node-%05d", (j*100+k)%nodes), Count: 10})
		}
	}
	must(fsm.CommitPlan(p), nil)
	for _, mode := range []struct {
		name    string
		changed int // nodes changed between reads; -1: a new RoundInput each read
	}{{"kept/changed=0", 0}, {"kept/changed=100", 100}, {"whole", -1}} {
		b.Run(mode.name, func(b *testing.B) {
			b.ReportAllocs()
			// The change sets of commands that changed mode.changed nodes.
			var names []string
			for i := range max(mode.changed, 0) {
				names = append(names, fmt.Sprintf("node-%05d", i*nodes/mode.changed))
			}
			c := &fsm.Changes{Kind: fsm.ChangeApplied, Nodes: names}
			var r roundinput.Kept
			r.Consume(&fsm.Changes{Kind: fsm.ChangeReset})
			for b.Loop() {
				if mode.changed < 0 {
					r = roundinput.Kept{}
				}
				r.Consume(c)
				in := r.Read(f, now, 20_000)
				if len(in.Nodes) != nodes || len(in.Groups) != 20 { // 20,000 tasks of the 50 pending groups
					b.Fatalf("%d nodes, %d groups", len(in.Nodes), len(in.Groups))
				}
			}
		})
	}
}

// BenchmarkPlacementInputBacklog measures a round's read when a backlog of
// 100,000 single-task jobs (a pending group each) waits and a round takes
// the default 20,000 tasks: the groups are taken in order without sorting
// them all.
func BenchmarkPlacementInputBacklog(b *testing.B) {
	f, must, now := fsm.BenchNodes(b, 1000)
	const jobs = 100_000
	specs := make([]api.JobSpec, jobs)
	for i := range specs {
		specs[i] = api.JobSpec{Name: "one", Priority: int32(i % 5), Tasks: []api.TaskGroupSpec{{Count: 1, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
			Image: api.Image{Rootfs: "/img"}, Command: []string{"/bin/work"},
			Resources: api.Resources{CPU: 500, Memory: 1 << 30}}}}}}}
	}
	must(fsm.SubmitJobs(now, specs))
	b.ReportAllocs()
	var r roundinput.Kept
	r.Consume(&fsm.Changes{Kind: fsm.ChangeReset})
	for b.Loop() {
		if in := r.Read(f, now, 20_000); len(in.Groups) != 20_000 || in.Groups[0].Priority != 4 {
			b.Fatalf("%d groups, the first of priority %d", len(in.Groups), in.Groups[0].Priority)
		}
	}
}

// TestRandomCommands applies random command sequences (valid, stale and
// invalid) and checks the FSM's invariants after every step, and that an
// input kept from round to round, read again only where the change sets
// said, is the input read whole.
func TestRandomCommands(t *testing.T) { fsm.RunRandomCommands(t, views{}) }

// TestPortsProperty places random jobs with static and dynamic ports
// through rounds read whole, and checks the FSM's port bookkeeping.
func TestPortsProperty(t *testing.T) { fsm.RunPortsProperty(t, views{}) }

// views reads rounds' inputs for RunRandomCommands.
type views struct{}

func (views) Build(f *fsm.FSM, now time.Time) *placement.Input { return roundinput.Build(f, now, 0) }

func (views) AddVictims(f *fsm.FSM, in *placement.Input, below int32) {
	roundinput.AddVictims(f, in, below)
}

func (views) NewKept() fsm.KeptInput { return &kept{} }

type kept struct{ roundinput.Kept }

func (k *kept) Read(f *fsm.FSM, now time.Time) *placement.Input { return k.Kept.Read(f, now, 0) }

func (k *kept) SetModified() { k.Modified = true }
