package fleet_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/bench/fleet"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/server"
)

// openDispatcher opens a single-replica dispatcher and waits until it
// leads.
func openDispatcher(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.Open(server.Config{ID: 1, Peers: map[uint64]string{1: ""},
		Dir: filepath.Join(t.TempDir(), "d"), HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := awaitChange(ctx, s.Dispatcher(), func() (bool, error) {
		_, ok := s.Dispatcher().Leading()
		return ok, nil
	}); err != nil {
		t.Fatalf("the dispatcher does not lead: %v", err)
	}
	return s
}

// awaitChange tests cond, and again at each change d's Changed signals
// (an applied entry, a change of leadership), until it holds: cond must
// depend only on d's leadership and what its state machine holds. It
// returns cond's error, or ctx's if ctx ends first.
func awaitChange(ctx context.Context, d *dispatcher.Dispatcher, cond func() (bool, error)) error {
	for {
		changed := d.Changed() // before cond, so that no change is missed
		if ok, err := cond(); ok || err != nil {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func TestFleetRunsAnArray(t *testing.T) {
	const nodes, tasks = 200, 1000
	s := openDispatcher(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	f, err := fleet.Start(ctx, fleet.Config{Addrs: []string{s.Addr()}, Nodes: nodes, Pool: "sim", CPU: 4000, Memory: 8 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t.Logf("%d nodes registered in %v", nodes, time.Since(start))
	if st := f.Stats(); st.Nodes != nodes || st.Registered != nodes {
		t.Fatalf("stats %+v", st)
	}
	if names := f.Names(); len(names) != nodes || names[0] != "fleet-1" {
		t.Fatalf("names %v...", names[:3])
	}
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{s.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ready := 0
	if err := awaitChange(ctx, s.Dispatcher(), func() (bool, error) {
		l, err := c.Nodes(ctx)
		if err != nil {
			return false, err
		}
		ready = 0
		for _, n := range l.Nodes {
			if n.State == api.NodeReady && n.Spec.Pool == "sim" {
				ready++
			}
		}
		return ready == nodes, nil
	}); err != nil {
		t.Fatalf("%d of %d nodes ready: %v", ready, nodes, err)
	}
	job := api.JobSpec{Name: "array", Pool: "sim", Tasks: []api.TaskGroupSpec{{Count: tasks, Pod: api.PodSpec{
		Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/img"}, Command: []string{"/x"},
			Resources: api.Resources{CPU: 1000, Memory: 1 << 30}}},
		Sim: &api.SimSpec{RunTime: api.Duration(200 * time.Millisecond)},
	}}}}
	res, err := c.Submit(ctx, []api.JobSpec{job}, api.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sawRunning := 0
	if err := awaitChange(ctx, s.Dispatcher(), func() (bool, error) {
		sawRunning = max(sawRunning, f.Stats().Running)
		return jobDone(ctx, c, res.Jobs[0])
	}); err != nil {
		t.Fatal(err)
	}
	st := f.Stats()
	t.Logf("array of %d done in %v; stats %+v; most running at once %d", tasks, time.Since(start), st, sawRunning)
	if st.Starts < tasks || st.Exits < tasks {
		t.Errorf("stats %+v: want %d starts and exits", st, tasks)
	}
	f.Close()
	f.Close()
}

func TestConfigValidate(t *testing.T) {
	_, err := fleet.Start(context.Background(), fleet.Config{Nodes: 0, NamePrefix: "a b", NameSuffix: "-p/1", CPU: -1})
	if err == nil {
		t.Fatal("Start took a bad config")
	}
	for _, want := range []string{"Addrs", "Nodes 0", `NamePrefix "a b"`, `NameSuffix "-p/1"`, "CPU -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// TestNameSuffix: fleets that differ in suffix interleave in name order.
func TestNameSuffix(t *testing.T) {
	s := openDispatcher(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var names []string
	for _, suffix := range []string{"-p1", "-p2"} {
		f, err := fleet.Start(ctx, fleet.Config{Addrs: []string{s.Addr()}, Nodes: 2, NameSuffix: suffix})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		names = append(names, f.Names()...)
	}
	slices.Sort(names)
	if want := []string{"fleet-1-p1", "fleet-1-p2", "fleet-2-p1", "fleet-2-p2"}; !slices.Equal(names, want) {
		t.Fatalf("names %v, want %v", names, want)
	}
}

// TestFleetHeartbeats: with a HeartbeatPeriod the nodes send what their
// pods' sim usage says, and the dispatcher's estimates take it in; a
// negative period is refused.
func TestFleetHeartbeats(t *testing.T) {
	s := openDispatcher(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := fleet.Start(ctx, fleet.Config{Addrs: []string{s.Addr()}, Nodes: 1, HeartbeatPeriod: -time.Second}); err == nil || !strings.Contains(err.Error(), "HeartbeatPeriod") {
		t.Fatalf("Start with a negative HeartbeatPeriod: %v", err)
	}
	f, err := fleet.Start(ctx, fleet.Config{Addrs: []string{s.Addr()}, Nodes: 2, Pool: "sim", CPU: 4000, Memory: 8 << 30,
		HeartbeatPeriod: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{s.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	job := api.JobSpec{Name: "online", Pool: "sim", QoS: api.QoSOnline, Tasks: []api.TaskGroupSpec{{Count: 4, Pod: api.PodSpec{
		Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/sim"}, Command: []string{"x"}, Resources: api.Resources{CPU: 1000, Memory: 1 << 30}}},
		Sim:        &api.SimSpec{RunTime: api.Duration(time.Hour), Usage: &api.SimUsage{CPU: 250, Memory: 100 << 20}},
	}}}}
	if _, err := c.Submit(ctx, []api.JobSpec{job}, api.SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	want := dispatcher.EstimateTotals{Nodes: 2, OnlineUsage: api.Usage{CPU: 1000, Memory: 400 << 20},
		OnlineEstimate: api.Capacity{CPU: 1000, Memory: 400 << 20}, OnlineAsked: api.Capacity{CPU: 4000, Memory: 4 << 30}}
	// The estimates follow the heartbeats, which the dispatcher keeps
	// in memory and signals to no one: poll.
	var got dispatcher.EstimateTotals
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for got, _ = s.Dispatcher().EstimateTotals(); got != want; got, _ = s.Dispatcher().EstimateTotals() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("estimate totals %+v, want %+v", got, want)
		}
	}
	if st := f.Stats(); st.Heartbeats == 0 || st.HeartbeatErrors != 0 {
		t.Errorf("stats: %d heartbeats, %d errors", st.Heartbeats, st.HeartbeatErrors)
	}
}

// jobDone reports whether job id succeeded, and an error if it failed.
func jobDone(ctx context.Context, c *api.Client, id string) (bool, error) {
	j, err := c.Job(ctx, id)
	switch {
	case err != nil:
		return false, err
	case j.State == api.JobFailed:
		return false, fmt.Errorf("job %s failed: %+v", id, j.Tasks)
	}
	return j.State == api.JobSucceeded, nil
}
