package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/internal/promtest"
	"github.com/sluicehq/sluice/raftkv"
)

// TestReplicaStoreFails runs three replicas over loopback whose stores
// can be made to fail (pebble's error-injecting filesystem), with a node
// long-polling the leader for its target, and breaks the leader's raft
// log. The leader's Server must report the failure (Failed, Err), end its
// watch streams, answer /readyz 503 and every other request 503
// not_leader on a connection it closes, and end the node's long-poll; a
// client of every replica must reach the new leader, where the node gets
// its new work.
func TestReplicaStoreFails(t *testing.T) {
	var broken atomic.Uint64 // the replica whose raft log writes fail
	cl := openThree(t, func(id uint64, cfg *server.Config) {
		cfg.FS = errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
			if broken.Load() == id && strings.HasSuffix(op.Path, ".log") &&
				(op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) {
				return errorfs.ErrInjected
			}
			return nil
		}))
	})
	servers, bases := cl.servers, cl.bases
	leader := func(except uint64) *server.Server { return cl.leader(t, except) }
	old := leader(0)
	oldID := old.Raft().Status().ID
	for _, s := range servers {
		waitFor(t, 10*time.Second, "every replica to know the leader", func() bool { return s.Raft().Status().Leader == oldID })
	}

	c, err := api.NewClient(api.ClientConfig{Addrs: bases, Timeout: 5 * time.Second, JitterSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var spec api.NodeSpec
	if err := json.Unmarshal([]byte(nodeJSON("n1", "")), &spec); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterNode(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t0, changed, err := c.Target(ctx, "n1", ^uint64(0), 0)
	if err != nil || !changed {
		t.Fatalf("first target: %v, %v", changed, err)
	}

	// The node's long-poll, open at the leader when its store fails.
	type result struct {
		t   api.NodeTarget
		err error
		at  time.Time
	}
	polled := make(chan result, 1)
	go func() {
		tg, _, err := c.Target(ctx, "n1", t0.Generation, 20*time.Second)
		polled <- result{tg, err, time.Now()}
	}()
	// Nothing outside tells that the long-poll reached the leader's
	// handler: this wait makes it likely. The checks below hold either
	// way.
	time.Sleep(200 * time.Millisecond)

	w := startWatch(t, old.Addr()+api.PathWatch, "")

	broken.Store(oldID)
	failedAt := time.Now()
	// A write makes the leader write its log: the submit fails there, and
	// the client, the submit being keyed, takes it to the new leader.
	res, err := c.SubmitBody(ctx, []byte(jobJSON("after", "", 1)), "", api.SubmitOptions{IdempotencyKey: "after"})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("keyed submit across the failure: %+v, %v", res, err)
	}
	submitted := time.Since(failedAt)
	select {
	case <-old.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("Failed() not closed 5 s after the leader's store failed")
	}
	if !errors.Is(old.Err(), raftkv.ErrStorage) || !errors.Is(old.Err(), errorfs.ErrInjected) {
		t.Errorf("Err() = %v, want ErrStorage wrapping the injected error", old.Err())
	}
	for _, s := range servers {
		id := s.Raft().Status().ID
		if id == oldID {
			continue
		}
		select {
		case <-s.Failed():
			t.Errorf("Failed() closed on the healthy replica %d", id)
		default:
		}
		if s.Err() != nil {
			t.Errorf("Err() of the healthy replica %d: %v", id, s.Err())
		}
	}

	// Its streams end, and its watcher goes elsewhere.
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
		t.Error("a watch stream at the failed replica is still open 5 s later")
	}

	// The failed replica: not ready, and every request is refused as by
	// a replica that is not the leader and did nothing.
	errorReply(t, do(t, req{method: "GET", url: old.Addr() + api.PathReady}), 503, api.CodeUnavailable, "stopped")
	if r := do(t, req{method: "GET", url: old.Addr() + api.PathHealth}); r.status != 200 {
		t.Errorf("healthz of the failed replica: %s", r)
	}
	// Its metrics still serve, and say it stopped.
	if v := promtest.Value(t, scrape(t, old.Addr(), ""), "sluice_raft_stopped"); v != 1 {
		t.Errorf("sluice_raft_stopped of the failed replica = %v, want 1", v)
	}
	for _, q := range []req{
		{method: "GET", url: old.Addr() + api.PathJobs},
		{method: "POST", url: old.Addr() + api.PathJobs, body: []byte(jobJSON("x", "", 1))},
		{method: "GET", url: old.Addr() + api.PathNode + "n1/target?wait=1s"},
		{method: "POST", url: old.Addr() + api.PathNode + "n1/reports", body: []byte(`{"reports":[]}`)},
	} {
		r := do(t, q)
		errorReply(t, r, 503, api.CodeNotLeader, "stopped")
		if !r.close {
			t.Errorf("%s %s: the failed replica keeps the connection open", q.method, q.url)
		}
	}

	// The node's long-poll ended at the failed replica and went on to the
	// new leader, which placed the job there.
	var got result
	select {
	case got = <-polled:
	case <-time.After(15 * time.Second):
		t.Fatal("the node's long-poll still waits 15 s after the failure")
	}
	if got.err != nil || len(got.t.Pods) != 1 {
		t.Fatalf("the node's long-poll across the failure: %+v, %v", got.t, got.err)
	}
	nl := leader(oldID)
	if err := c.Heartbeat(ctx, "n1", api.NodeUsage{}); err != nil {
		t.Errorf("a heartbeat after the failure: %v", err)
	}
	t.Logf("replica %d failed; the keyed submit was acknowledged after %v, the node's long-poll got the job from replica %d after %v",
		oldID, submitted.Round(time.Millisecond), nl.Raft().Status().ID, got.at.Sub(failedAt).Round(time.Millisecond))
}
