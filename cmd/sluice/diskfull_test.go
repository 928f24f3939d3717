package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// mountTmpfs mounts a tmpfs of size bytes on dir until the test's cleanup;
// it skips the test where mounting is not allowed.
func mountTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// fillDisk writes dir/filler until the filesystem has no room left.
func fillDisk(dir string) (int64, error) {
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			k, err := f.Write(buf)
			n += int64(k)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// diskfullRequest is one submit of TestReplicaDiskFull: keyed, resent as
// it is until acknowledged.
type diskfullRequest struct {
	key   string
	body  []byte
	names []string
	jobs  []string  // the acknowledged IDs
	acked time.Time // when acknowledged
}

func newDiskfullRequest(i, jobs int) *diskfullRequest {
	q := &diskfullRequest{key: fmt.Sprintf("diskfull-%d", i)}
	var b strings.Builder
	b.WriteString("[")
	for k := range jobs {
		name := fmt.Sprintf("df-%d-%d", i, k)
		q.names = append(q.names, name)
		if k > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":%q,"tasks":[{"count":1,"pod":{"sim":{"run_time":"200ms"},"containers":[{"image":{"rootfs":"/img"},"command":["/w"],"resources":{"cpu":100,"memory":"1Mi"}}]}}]}`, name)
	}
	b.WriteString("]")
	q.body = []byte(b.String())
	return q
}

// TestReplicaDiskFull runs three `sluice dispatcher` processes, each on a
// small tmpfs of its own, and three nodelets (simulated pods) in this
// process, while a client submits keyed jobs; then it fills the leader's
// tmpfs. The leader's store fails: its process must exit non-zero saying
// why, the nodes must move to the new leader without being marked down,
// tasks must keep being placed and run within seconds, and every
// acknowledged job must be committed once and succeed.
func TestReplicaDiskFull(t *testing.T) {
	const (
		replicas  = 3
		nodes     = 3
		perSubmit = 4
		tmpfsSize = 64 << 20
	)
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	reps := startDispatcherProcsWith(t, replicas, func(dir string) { mountTmpfs(t, dir, tmpfsSize) })
	for _, r := range reps {
		waitProcReady(ctx, t, r)
	}
	victim, err := findLeaderProc(ctx, reps)
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, len(reps))
	var survivors []string
	for i, r := range reps {
		addrs[i] = r.base
		if r != victim {
			survivors = append(survivors, r.base)
		}
	}
	t.Logf("%d replicas ready after %v; replica %d leads", replicas, time.Since(start).Round(time.Millisecond), victim.id)

	// The nodelets, whose logs are shown if the test fails.
	nodeLog := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			out := nodeLog.String()
			if len(out) > 32<<10 {
				out = "[…]" + out[len(out)-32<<10:]
			}
			t.Logf("nodelets' logs:\n%s", out)
		}
	})
	logger := slog.New(slog.NewTextHandler(nodeLog, &slog.HandlerOptions{Level: slog.LevelInfo}))
	for i := range nodes {
		name := fmt.Sprintf("n%d", i+1)
		stop, err := startNodelet(ctx, nodeletConfig{
			dispatchers: addrs, name: name, runtime: "sim", listen: "127.0.0.1:0",
			stateDir: t.TempDir(), cpu: 8000, memory: 8 << 30,
		}, logger.With("node", name))
		if err != nil {
			t.Fatalf("nodelet %s: %v", name, err)
		}
		t.Cleanup(func() {
			if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
				t.Logf("nodelet %s: %v", name, err)
			}
		})
	}

	c, err := api.NewClient(api.ClientConfig{Addrs: addrs, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// The submitter: a keyed request every 50 ms, each resent as it is
	// until acknowledged.
	var (
		mu        sync.Mutex
		reqs      []*diskfullRequest
		submitErr error
		retried   []string // errors the submitter saw
	)
	subCtx, stopSubmitting := context.WithCancel(ctx)
	defer stopSubmitting()
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			q := newDiskfullRequest(i, perSubmit)
			for {
				res, err := c.SubmitBody(subCtx, q.body, "application/json", api.SubmitOptions{IdempotencyKey: q.key})
				if err == nil {
					q.jobs, q.acked = res.Jobs, time.Now()
					mu.Lock()
					reqs = append(reqs, q)
					mu.Unlock()
					break
				}
				if subCtx.Err() != nil {
					return
				}
				mu.Lock()
				retried = append(retried, err.Error())
				if code := api.ErrorCode(err); code == api.CodeInvalid || code == api.CodeTooLarge || len(retried) > 200 {
					submitErr = fmt.Errorf("request %s: %w", q.key, err)
					mu.Unlock()
					return
				}
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
			select {
			case <-subCtx.Done():
				return
			case <-tick.C:
			}
		}
	})

	// The watcher of nodes: any node seen down, through the survivors.
	sc, err := api.NewClient(api.ClientConfig{Addrs: survivors, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var downSeen []string
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	wg.Go(func() {
		for watchCtx.Err() == nil {
			if nl, err := sc.Nodes(watchCtx); err == nil {
				for _, n := range nl.Nodes {
					if n.State != api.NodeReady {
						mu.Lock()
						downSeen = append(downSeen, fmt.Sprintf("%s %s at %v", n.Spec.Name, n.State, time.Since(start).Round(time.Millisecond)))
						mu.Unlock()
					}
				}
			}
			select {
			case <-watchCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})

	// succeeded counts the jobs of reqs that succeeded, as the survivors
	// list them.
	succeeded := func(reqs []*diskfullRequest) (int, error) {
		list, err := listJobsPaged(ctx, sc, false)
		if err != nil {
			return 0, err
		}
		state := make(map[string]api.JobState, len(list))
		for _, j := range list {
			state[j.ID] = j.State
		}
		n := 0
		for _, q := range reqs {
			for _, id := range q.jobs {
				if state[id] == api.JobSucceeded {
					n++
				}
			}
		}
		return n, nil
	}
	acked := func() []*diskfullRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]*diskfullRequest(nil), reqs...)
	}
	// Work flows before the failure.
	for {
		if n, _ := succeeded(acked()); n >= 3*perSubmit {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no job succeeded before the failure (%d acknowledged requests)", len(acked()))
		}
		time.Sleep(100 * time.Millisecond)
	}

	ackedBefore := len(acked())
	filled, err := fillDisk(victim.dir)
	failedAt := time.Now()
	if err != nil {
		t.Fatalf("filling the leader's disk: %v", err)
	}
	exitedAt := make(chan time.Time, 1)
	go func() {
		<-victim.done // closed at the latest by the test's cleanup
		exitedAt <- time.Now()
	}()
	t.Logf("filled replica %d's tmpfs with %d MiB after %v, %d requests acknowledged", victim.id, filled>>20,
		failedAt.Sub(start).Round(time.Millisecond), ackedBefore)

	// Placement resumes: the first job acknowledged after the failure
	// succeeds within seconds.
	var resumedAfter time.Duration
	for {
		var after []*diskfullRequest
		for _, q := range acked() {
			if q.acked.After(failedAt) {
				after = append(after, q)
			}
		}
		if n, _ := succeeded(after); n > 0 {
			resumedAfter = time.Since(failedAt)
			break
		}
		if time.Since(failedAt) > 30*time.Second {
			t.Fatalf("no job acknowledged after the failure succeeded within 30 s (%d acknowledged since)", len(after))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The failed replica exits, soon. (Placement is checked first: were the
	// replica to go on answering, the clients must still fail over.)
	var exitedAfter time.Duration
	select {
	case at := <-exitedAt:
		exitedAfter = at.Sub(failedAt)
		var ee *exec.ExitError
		if !errors.As(victim.waitErr, &ee) || ee.ExitCode() != exitError {
			t.Errorf("replica %d exited with %v, want exit status %d", victim.id, victim.waitErr, exitError)
		}
	case <-time.After(time.Until(failedAt.Add(10 * time.Second))):
		t.Errorf("replica %d still runs 10 s after its disk filled", victim.id)
	}
	out := victim.out.String()
	if !strings.Contains(out, "the replica stopped on an error; exiting") || !strings.Contains(out, "no space left on device") {
		t.Errorf("replica %d did not log why it exited", victim.id)
	}
	shown := 0
	for line := range strings.Lines(out) {
		if strings.Contains(line, "level=ERROR") && shown < 5 {
			t.Logf("replica %d: %s", victim.id, strings.TrimSpace(line))
			shown++
		}
	}

	// Some more submits to the new leader, then everything acknowledged
	// must succeed.
	pollUntil(t, 30*time.Second, "more submits acknowledged after the failure", func() (bool, string) {
		n := 0
		for _, q := range acked() {
			if q.acked.After(failedAt) {
				n++
			}
		}
		return n >= 10, fmt.Sprintf("%d acknowledged since", n)
	})
	stopSubmitting()
	all := acked()
	total := 0
	for _, q := range all {
		total += len(q.jobs)
	}
	var done int
	for {
		if done, err = succeeded(all); err == nil && done == total {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d acknowledged jobs succeeded (%v)", done, total, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	drainedAfter := time.Since(failedAt)
	stopWatching()
	wg.Wait()
	if submitErr != nil {
		t.Fatalf("submitter: %v", submitErr)
	}

	// Every acknowledged job is committed once, under its name.
	list, err := listJobsPaged(ctx, sc, true)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]string{}
	for _, j := range list {
		byName[j.Spec.Name] = append(byName[j.Spec.Name], j.ID)
	}
	for _, q := range all {
		for i, name := range q.names {
			if ids := byName[name]; len(ids) != 1 || ids[0] != q.jobs[i] {
				t.Errorf("job %s (acknowledged as %s): committed as %v", name, q.jobs[i], ids)
			}
		}
	}
	nl, err := sc.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nl.Nodes {
		if n.State != api.NodeReady {
			t.Errorf("node %s is %s at the end", n.Spec.Name, n.State)
		}
	}
	if len(nl.Nodes) != nodes {
		t.Errorf("%d nodes, want %d", len(nl.Nodes), nodes)
	}
	if len(downSeen) > 0 {
		t.Errorf("nodes seen not ready: %s", summarizeErrors(downSeen))
	}
	t.Logf("replica %d exited %v after its disk filled; a job submitted after the failure succeeded after %v; "+
		"all %d acknowledged jobs (%d requests, %d of them after the failure) succeeded %v after it; the submitter saw %d errors: %s",
		victim.id, exitedAfter.Round(time.Millisecond), resumedAfter.Round(time.Millisecond), total, len(all), len(all)-ackedBefore,
		drainedAfter.Round(time.Millisecond), len(retried), summarizeErrors(retried))
}
