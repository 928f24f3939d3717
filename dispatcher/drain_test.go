package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/fsm"
)

// TestDrain runs the leader's loop on a manual clock: a draining node gets
// no new task, though it has room and a registration repeats; at its
// deadline (enforced at the next liveness check) its tasks are stopped and
// requeued, not counted as failed attempts, and run on another node; an
// undrained node takes work again; a drained node without tasks is
// removed, and its name registers afresh. Every replica holds the same
// outcome.
func TestDrain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := clock.NewManual(time.Time{})
	c := newCluster(t, 3, func(cfg *dispatcher.Config) {
		cfg.Clock, cfg.MaxWait, cfg.Period = cl, 5*time.Millisecond, time.Hour
		cfg.NodeTTL, cfg.NodeTTLPerNode, cfg.LivenessEvery = time.Hour, -1, time.Minute
		cfg.JobRetention, cfg.JobRetentionMax = -1, -1
	})
	r := c.leader()
	d := r.d
	settle(t, d)
	// step lets the loop take in what happened, moves the clock, and lets
	// the loop act on it.
	step := func(by time.Duration) {
		t.Helper()
		settle(t, d)
		cl.Advance(by)
		settle(t, d)
	}
	register := func(name string, cpu int64) {
		t.Helper()
		if err := d.Register(ctx, nodeSpec(name, cpu)); err != nil {
			t.Fatal(err)
		}
		step(5 * time.Millisecond) // the round the registration asks for
	}
	submit := func(name string, count int64, attempts int32) string {
		t.Helper()
		spec := jobSpec(name, count, 1000, 0, time.Hour)
		spec.Retry.MaxAttempts = attempts
		id := r.submit(t, ctx, spec)
		step(5 * time.Millisecond)
		return id
	}
	// tasksOf lists a job's tasks in f as "attempt@node:state[:reason]".
	tasksOf := func(f *fsm.FSM, id string) string {
		t.Helper()
		ts, ok := f.JobTasks(id, "", 0)
		if !ok {
			t.Fatalf("no job %s", id)
		}
		var out []string
		for _, tk := range ts {
			s := fmt.Sprintf("%d@%s:%s", tk.Attempt, tk.Node, tk.State)
			if tk.Reason != "" {
				s += ":" + string(tk.Reason)
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	tasks := func(id string) string { t.Helper(); return tasksOf(r.f, id) }
	// agree checks that every replica applied what the leader did, and
	// holds the same nodes and tasks of ids.
	agree := func(ids ...string) {
		t.Helper()
		state := func(f *fsm.FSM) string {
			var b strings.Builder
			for _, n := range f.Nodes() {
				fmt.Fprintf(&b, "%s:%s:%v:%v:%d ", n.Spec.Name, n.State, n.Drained, n.DrainDeadline, n.Tasks)
			}
			for _, id := range ids {
				b.WriteString(tasksOf(f, id) + " ")
			}
			return b.String()
		}
		want, applied := state(r.f), r.f.Applied()
		for _, o := range c.replicas {
			c.waitChange(t, 10*time.Second, fmt.Sprintf("replica %d to apply index %d", o.id, applied), func() bool { return o.f.Applied() >= applied })
			if got := state(o.f); got != want {
				t.Fatalf("replica %d holds %s; the leader %s", o.id, got, want)
			}
		}
	}
	node := func(name string) fsm.NodeInfo {
		t.Helper()
		for _, n := range r.f.Nodes() {
			if n.Spec.Name == name {
				return n
			}
		}
		t.Fatalf("no node %s", name)
		return fsm.NodeInfo{}
	}
	expect := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %s, want %s", what, got, want)
		}
	}

	register("n1", 4000)
	a := submit("a", 2, 1) // one attempt: a failure would fail the job
	expect("a's tasks", tasks(a), "1@n1:assigned 1@n1:assigned")

	start := cl.Now()
	res, err := d.DrainNode(ctx, "n1", api.DrainRequest{Timeout: api.Duration(10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != api.NodeDraining || !res.Drained || !res.Deadline.Equal(start.Add(10*time.Minute)) || res.Tasks != 2 || res.Stopped != 0 {
		t.Fatalf("drain: %+v", res)
	}
	register("n1", 4000) // a nodelet's registration does not undrain it
	if n := node("n1"); n.State != api.NodeDraining || !n.DrainDeadline.Equal(res.Deadline) {
		t.Fatalf("n1 after registering again: %s until %v", n.State, n.DrainDeadline)
	}

	register("n2", 2000)
	b := submit("b", 3, 3)
	expect("b's tasks (n1 has room, but drains)", tasks(b), "1@n2:assigned 1@n2:assigned")
	if j, _ := r.f.Job(b); j.Groups[0].Pending != 1 {
		t.Fatalf("b: %d pending, want 1", j.Groups[0].Pending)
	}
	register("n3", 3000) // takes b's last task, and has room for a's two
	expect("b's tasks", tasks(b), "1@n2:assigned 1@n2:assigned 1@n3:assigned")

	// Liveness checks every minute: the tasks run until the deadline.
	for cl.Now().Before(start.Add(9 * time.Minute)) {
		step(time.Minute)
	}
	expect("a's tasks before the deadline", tasks(a), "1@n1:assigned 1@n1:assigned")
	step(time.Minute)
	expect("a's tasks at the deadline", tasks(a), "1@n1:lost:drained 1@n1:lost:drained")
	agree(a, b)
	if j, _ := r.f.Job(a); j.State != fsm.JobRunning || j.Groups[0].Pending != 2 || j.Groups[0].Failed != 0 {
		t.Fatalf("a at the deadline: %s, %+v", j.State, j.Groups[0])
	}
	if n := node("n1"); n.State != api.NodeDraining || n.Tasks != 0 {
		t.Fatalf("n1 at the deadline: %s, %d tasks", n.State, n.Tasks)
	}
	step(5 * time.Millisecond)
	expect("a's tasks requeued", tasks(a), "2@n3:assigned 2@n3:assigned")
	step(time.Minute) // a later check proposes nothing more
	expect("a's tasks a minute on", tasks(a), "2@n3:assigned 2@n3:assigned")

	// Undrained, n1 takes work again: the only node with room.
	ur, err := d.UndrainNode(ctx, "n1")
	if err != nil || ur.State != api.NodeReady || ur.Drained {
		t.Fatalf("undrain: %+v, %v", ur, err)
	}
	step(5 * time.Millisecond)
	e := submit("e", 1, 1)
	expect("e's task", tasks(e), "1@n1:assigned")

	if err := d.RemoveNode(ctx, "n1"); !errors.Is(err, fsm.ErrNodeBusy) {
		t.Fatalf("remove of a ready node: %v, want ErrNodeBusy", err)
	}
	if _, err := d.DrainNode(ctx, "nx", api.DrainRequest{}); !errors.Is(err, fsm.ErrNotFound) {
		t.Fatalf("drain of an unknown node: %v, want ErrNotFound", err)
	}
	// A deadline now stops the tasks as the drain applies.
	res, err = d.DrainNode(ctx, "n1", api.DrainRequest{Deadline: cl.Now()})
	if err != nil || res.Stopped != 1 || res.Tasks != 0 {
		t.Fatalf("drain with a deadline now: %+v, %v", res, err)
	}
	if err := d.RemoveNode(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	step(5 * time.Millisecond)
	expect("e's task, n1 removed", tasks(e), "1@n1:lost:drained")
	register("n1", 1000)
	if n := node("n1"); n.State != api.NodeReady || n.Drained || n.Spec.Capacity.CPU != 1000 {
		t.Fatalf("n1 registered again: %s drained=%v cpu=%d", n.State, n.Drained, n.Spec.Capacity.CPU)
	}
	expect("e's task", tasks(e), "2@n1:assigned")
	agree(a, b, e)
	checkInvariants(t, r.f)
}
