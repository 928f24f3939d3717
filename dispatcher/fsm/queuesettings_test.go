package fsm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestSetQueue sets, changes and clears queues' settings, with a job
// running in one of them, and checks after each step the listing, the
// round input's queues, and that a Load of the store gives the same state.
func TestSetQueue(t *testing.T) {
	q := newSeq(t)
	f, s := q.f, q.s
	now := time.Unix(1_800_000_000, 0)
	reload := func() {
		t.Helper()
		g := New()
		if err := g.Load(s); err != nil {
			t.Fatalf("load: %v", err)
		}
		if a, b := f.dump(), g.dump(); a != b {
			t.Fatalf("loaded state differs:\nlive:\n%s\nloaded:\n%s", a, b)
		}
		if a, b := fmt.Sprint(f.Queues()), fmt.Sprint(g.Queues()); a != b {
			t.Fatalf("loaded queues differ:\nlive:   %s\nloaded: %s", a, b)
		}
	}
	set := func(name string, st api.QueueSettings) {
		t.Helper()
		cmd, err := SetQueue(now, name, st)
		if err != nil {
			t.Fatal(err)
		}
		q.apply(cmd)
		s.store(f)
		s.commit()
		reload()
	}
	q.node(now, api.Capacity{CPU: 4000, Memory: 4 << 30})
	cmd, err := SubmitJobs(now, []api.JobSpec{{Name: "j", Queue: "batch", Tasks: []api.TaskGroupSpec{{Name: "work", Count: 3, Pod: api.PodSpec{
		Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/r"}, Command: []string{"x"}, Resources: api.Resources{CPU: 100, Memory: 1 << 20}}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	q.apply(cmd)
	q.apply(CommitPlan(&Plan{Term: 1, Index: q.index, Now: now, Assignments: []Assignment{{Group: GroupKey{Job: "j1", Group: "work"}, Node: "n1", Count: 2}}}))

	set("batch", api.QueueSettings{Weight: 3, Caps: api.QueueCaps{CPU: 1000, Tasks: 5}})
	set("idle", api.QueueSettings{Caps: api.QueueCaps{Memory: 1 << 30, GPUs: 2}})
	want := "[{batch {3 {1000 0 0 5}} 0 {200 2097152 0 0 0} 2 1} {idle {0 {0 1073741824 2 0}} 0 {0 0 0 0 0} 0 0}]"
	if got := fmt.Sprint(f.Queues()); got != want {
		t.Fatalf("Queues() = %s\nwant        %s", got, want)
	}
	var reads []QueueRead
	f.ReadRound(func(r RoundRead) {
		for q := range r.Queues() {
			reads = append(reads, q)
		}
	})
	slices.SortFunc(reads, func(a, b QueueRead) int { return strings.Compare(a.Name, b.Name) })
	wantIn := "[{batch {200 2097152 0 0 0} 2 {3 {1000 0 0 5}}} {idle {0 0 0 0 0} 0 {0 {0 1073741824 2 0}}}]"
	if got := fmt.Sprint(reads); got != wantIn {
		t.Fatalf("round input queues = %s\nwant                   %s", got, wantIn)
	}

	// Replacing settings replaces them whole; all zero removes them.
	set("batch", api.QueueSettings{Caps: api.QueueCaps{GPUs: 1}})
	set("idle", api.QueueSettings{})
	want = "[{batch {0 {0 0 1 0}} 0 {200 2097152 0 0 0} 2 1}]"
	if got := fmt.Sprint(f.Queues()); got != want {
		t.Fatalf("Queues() = %s\nwant        %s", got, want)
	}
	if _, ok := s.m[prefixQueue+"idle"]; ok {
		t.Fatal("cleared queue's record still stored")
	}
}

// TestPlanHeldToCaps: a plan's assignment that would take its queue past a
// cap (set after the plan was computed) is rejected, and the next within
// them applies.
func TestPlanHeldToCaps(t *testing.T) {
	q := newSeq(t)
	now := time.Unix(1_800_000_000, 0)
	q.node(now, api.Capacity{CPU: 4000, Memory: 4 << 30, GPUs: 4})
	cmd, err := SubmitJobs(now, []api.JobSpec{{Name: "j", Queue: "batch", Tasks: []api.TaskGroupSpec{{Name: "work", Count: 6, Pod: api.PodSpec{
		Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/r"}, Command: []string{"x"}, Resources: api.Resources{CPU: 100, Memory: 1 << 20, GPUs: 1}}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	q.apply(cmd)
	for _, tc := range []struct {
		caps     api.QueueCaps
		count    int64
		rejected bool
	}{
		{api.QueueCaps{Tasks: 2}, 3, true},
		{api.QueueCaps{Tasks: 2}, 2, false},
		{api.QueueCaps{CPU: 300}, 2, true},
		{api.QueueCaps{CPU: 300, Memory: 1 << 30}, 1, false},
		{api.QueueCaps{GPUs: 3}, 1, true},
	} {
		set, err := SetQueue(now, "batch", api.QueueSettings{Caps: tc.caps})
		if err != nil {
			t.Fatal(err)
		}
		q.apply(set)
		res, err := DecodePlanResult(q.apply(CommitPlan(&Plan{Term: 1, Index: q.index, Now: now,
			Assignments: []Assignment{{Group: GroupKey{Job: "j1", Group: "work"}, Node: "n1", Count: tc.count}}})))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(res.Rejected) == 1 && res.Rejected[0].Code == RejectQuota; got != tc.rejected || !got && res.Placed != tc.count {
			t.Fatalf("caps %+v, %d tasks: %+v", tc.caps, tc.count, res)
		}
	}
}

// TestSetQueueRefuses: bad names and settings make no command, and a
// corrupt record fails Load.
func TestSetQueueRefuses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		name string
		s    api.QueueSettings
	}{
		{"", api.QueueSettings{}},
		{"bad name", api.QueueSettings{}},
		{"q", api.QueueSettings{Weight: -1}},
		{"q", api.QueueSettings{Weight: api.MaxQueueWeight + 1}},
		{"q", api.QueueSettings{Caps: api.QueueCaps{CPU: -1}}},
		{"q", api.QueueSettings{Caps: api.QueueCaps{Memory: -1}}},
		{"q", api.QueueSettings{Caps: api.QueueCaps{GPUs: -1}}},
		{"q", api.QueueSettings{Caps: api.QueueCaps{Tasks: -1}}},
	} {
		if _, err := SetQueue(now, tc.name, tc.s); err == nil {
			t.Errorf("SetQueue(%q, %+v): no error", tc.name, tc.s)
		}
	}
	s := newMemStore()
	s.loadRefuses(t, prefixQueue+"q", []byte{recordVersion + 1, 0, 0, 0, 0, 0})
	s.loadRefuses(t, prefixQueue+"q", []byte{recordVersion, 0, 1, 0, 0, 0})   // cap of -1
	s.loadRefuses(t, prefixQueue+"q", []byte{recordVersion, 0, 0, 0, 0})      // short
	s.loadRefuses(t, prefixQueue+"q q", []byte{recordVersion, 0, 2, 0, 0, 0}) // bad name
}
