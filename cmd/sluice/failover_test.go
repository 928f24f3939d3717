package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/porttest"
)

// dispatcherProc is one `sluice dispatcher` process started by a test.
type dispatcherProc struct {
	id       int
	httpAddr string // host:port of the HTTP API
	base     string // "http://" + httpAddr
	dir      string // the data directory
	args     []string
	out      *syncBuffer // stdout and stderr of every run, in order
	cmd      *exec.Cmd
	done     chan struct{} // closed when cmd has been waited for
	waitErr  error         // cmd.Wait's error, read after done
}

// procEnv is the environment of a replica process: this one's without
// SLUICE_* settings (the command line gives them all), plus testAsMainEnv.
func procEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envPrefix) })
	return append(env, testAsMainEnv+"=1")
}

// start runs the replica's process, the test binary acting as sluice. Its
// output goes to r.out; t.Cleanup kills it and waits for it.
func (r *dispatcherProc) start(t *testing.T, exe string) {
	t.Helper()
	cmd := exec.Command(exe, r.args...)
	cmd.Env = procEnv()
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot run the test binary as sluice: %v", err)
	}
	fmt.Fprintf(r.out, "--- test: started replica %d, pid %d\n", r.id, cmd.Process.Pid)
	r.cmd, r.done = cmd, make(chan struct{})
	go func() {
		r.waitErr = cmd.Wait()
		fmt.Fprintf(r.out, "--- test: replica %d exited: %v\n", r.id, r.waitErr)
		close(r.done)
	}()
	done := r.done
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
}

// exited reports whether the replica's process has ended.
func (r *dispatcherProc) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// startDispatcherProcs starts n dispatcher replicas forming one cluster on free
// loopback ports, each with its own data directory. On failure, t.Cleanup
// prints each replica's output and fails the test when any reported a data
// race or panicked.
func startDispatcherProcs(t *testing.T, n int) []*dispatcherProc {
	t.Helper()
	return startDispatcherProcsWith(t, n, nil)
}

// startDispatcherProcsWith is startDispatcherProcs calling prepare, when
// not nil, with each replica's data directory before any starts; its
// cleanups run after the processes are killed.
func startDispatcherProcsWith(t *testing.T, n int, prepare func(dir string)) []*dispatcherProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot find the test binary: %v", err)
	}
	ports := porttest.Ports(t, 2*n)
	var peers, peerHTTP []string
	reps := make([]*dispatcherProc, n)
	for i := range reps {
		id := i + 1
		httpAddr := "127.0.0.1:" + strconv.Itoa(ports[n+i])
		reps[i] = &dispatcherProc{id: id, httpAddr: httpAddr, base: "http://" + httpAddr, dir: t.TempDir(), out: &syncBuffer{}}
		if prepare != nil {
			prepare(reps[i].dir)
		}
		peers = append(peers, fmt.Sprintf("%d=127.0.0.1:%d", id, ports[i]))
		peerHTTP = append(peerHTTP, fmt.Sprintf("%d=%s", id, reps[i].base))
	}
	// Registered after the TempDirs, so that it runs before they go, and
	// before the processes are killed, so that it runs after.
	t.Cleanup(func() {
		for _, r := range reps {
			out := r.out.String()
			if strings.Contains(out, "WARNING: DATA RACE") || strings.Contains(out, "panic: ") {
				t.Errorf("replica %d reported a data race or a panic", r.id)
			}
			if t.Failed() {
				const tail = 48 << 10
				if len(out) > tail {
					out = "[…]" + out[len(out)-tail:]
				}
				t.Logf("output of replica %d (%s):\n%s", r.id, r.base, out)
			}
		}
	})
	for _, r := range reps {
		r.args = []string{"dispatcher", "--id", strconv.Itoa(r.id),
			"--peers", strings.Join(peers, ","), "--peer-http", strings.Join(peerHTTP, ","),
			"--data", r.dir, "--http-addr", r.httpAddr, "--log-level", "info"}
		r.start(t, exe)
	}
	return reps
}

// waitProcReady waits until r answers /readyz with 200: it knows a leader.
func waitProcReady(ctx context.Context, t *testing.T, r *dispatcherProc) {
	t.Helper()
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{r.base}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for {
		err := c.Ready(ctx)
		if err == nil {
			return
		}
		if r.exited() {
			t.Fatalf("replica %d exited before it was ready: %v", r.id, r.waitErr)
		}
		if ctx.Err() != nil {
			t.Fatalf("replica %d not ready: %v", r.id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// findLeaderProc returns the replica of reps (all running) that leads, as the
// others say: a write reaching a follower is answered 307 with the
// leader's URL. The probe is a submit with an unsupported content type, so
// that even the leader does nothing with it.
func findLeaderProc(ctx context.Context, reps []*dispatcherProc) (*dispatcherProc, error) {
	hc := &http.Client{
		Timeout:       5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer hc.CloseIdleConnections()
	var last error
	for ctx.Err() == nil {
		votes := map[string]int{}
		leading := map[string]bool{}
		var other []string // answers that are neither
		for _, r := range reps {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+api.PathJobs, strings.NewReader("probe"))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Content-Type", "text/plain")
			resp, err := hc.Do(req)
			if err != nil {
				other = append(other, err.Error())
				continue
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusTemporaryRedirect:
				loc := resp.Header.Get("Location")
				votes[strings.TrimSuffix(loc, api.PathJobs)]++
			case http.StatusUnsupportedMediaType:
				leading[r.base] = true
			default:
				other = append(other, fmt.Sprintf("replica %d answered %s", r.id, resp.Status))
			}
		}
		// The leader is the one that serves the write and that every
		// other replica names.
		for _, r := range reps {
			if leading[r.base] && len(leading) == 1 && votes[r.base] == len(reps)-1 {
				return r, nil
			}
		}
		last = fmt.Errorf("no agreed leader yet: serving %v, named by followers %v, other answers %q", leading, votes, other)
		time.Sleep(50 * time.Millisecond)
	}
	return nil, fmt.Errorf("no leader found: %w (%w)", ctx.Err(), last)
}

// listJobsPaged lists every job through c, page by page.
func listJobsPaged(ctx context.Context, c *api.Client, consistent bool) ([]api.JobStatus, error) {
	var all []api.JobStatus
	q := api.JobQuery{Limit: 500, Consistent: consistent}
	for {
		page, err := c.Jobs(ctx, q)
		if err != nil {
			return all, err
		}
		all = append(all, page.Jobs...)
		if page.Next == "" {
			return all, nil
		}
		if page.Next == q.After {
			return all, fmt.Errorf("listing does not advance past %q", q.After)
		}
		q.After = page.Next
	}
}

// summarizeErrors lists distinct errors in order of first appearance,
// each with its count.
func summarizeErrors(errs []string) string {
	var distinct []string
	count := map[string]int{}
	for _, e := range errs {
		if count[e] == 0 {
			distinct = append(distinct, e)
		}
		count[e]++
	}
	for i, e := range distinct {
		distinct[i] = fmt.Sprintf("%d× %s", count[e], e)
	}
	return strings.Join(distinct, " | ")
}

// failoverRequest is one submit of a failover client: its body and key
// never change across retries.
type failoverRequest struct {
	client, req int
	key         string
	body        []byte

	// Set once acknowledged.
	res      api.SubmitResponse
	attempts int
	errs     []string // the errors of the failed attempts
}

// failoverJobName names item i of request r of client c.
func failoverJobName(c, r, i int) string { return fmt.Sprintf("c%d-r%d-j%d", c, r, i) }

func newFailoverRequest(c, r, jobs int) *failoverRequest {
	var b strings.Builder
	b.WriteString("[")
	for i := range jobs {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"name":%q,"labels":{"client":"%d","request":"%d","item":"%d"},"tasks":[{"count":1,"pod":{"containers":[{"image":{"rootfs":"/img"},"command":["/w"],"resources":{"cpu":1,"memory":1024}}]}}]}`,
			failoverJobName(c, r, i), c, r, i)
	}
	b.WriteString("]")
	return &failoverRequest{client: c, req: r, key: fmt.Sprintf("client-%d-req-%d", c, r), body: []byte(b.String())}
}

// TestFailoverExactlyOnce kills the leader of a three-replica cluster of
// real `sluice dispatcher` processes while clients submit, each retrying a
// failed request with the same body and idempotency key until it is
// acknowledged. Every job must end up committed exactly once: nothing an
// acknowledgement named is lost, no retry creates a second job, and a
// resubmission answers the first IDs as existing. The killed replica,
// restarted on its data directory, catches up.
func TestFailoverExactlyOnce(t *testing.T) {
	const (
		replicas = 3
		clients  = 4
		requests = 12 // per client
		jobs     = 50 // per request
		total    = clients * requests * jobs
		// Each client pauses before this request until the leader has
		// been killed, so that the kill falls amid the submissions.
		gate = requests / 2
		// The leader is killed once this many requests were acknowledged.
		killAfter = clients * requests / 4
	)
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()

	reps := startDispatcherProcs(t, replicas)
	for _, r := range reps {
		waitProcReady(ctx, t, r)
	}
	t.Logf("%d replicas ready after %v", replicas, time.Since(start).Round(time.Millisecond))

	addrs := make([]string, len(reps))
	for i, r := range reps {
		addrs[i] = r.base
	}
	reqs := make([][]*failoverRequest, clients)
	for c := range reqs {
		reqs[c] = make([]*failoverRequest, requests)
		for r := range reqs[c] {
			reqs[c][r] = newFailoverRequest(c, r, jobs)
		}
	}

	// The clients submit with a deadline; the killer kills the leader once
	// killAfter requests were acknowledged.
	subCtx, subCancel := context.WithTimeout(ctx, 60*time.Second)
	defer subCancel()
	var (
		acked, inflight atomic.Int64
		killed          = make(chan struct{}) // closed once the leader is dead (or the killer gave up)
		victim          *dispatcherProc
		killErr         error
		inflightAtKill  int64
		ackedAtKill     int64
		wg              sync.WaitGroup
		clientErrs      = make([]error, clients)
	)
	wg.Go(func() {
		defer close(killed)
		for acked.Load() < killAfter {
			if subCtx.Err() != nil {
				killErr = fmt.Errorf("only %d requests acknowledged before the deadline", acked.Load())
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		fctx, fcancel := context.WithTimeout(subCtx, 20*time.Second)
		defer fcancel()
		victim, killErr = findLeaderProc(fctx, reps)
		if killErr != nil {
			return
		}
		inflightAtKill, ackedAtKill = inflight.Load(), acked.Load()
		killErr = victim.cmd.Process.Signal(syscall.SIGKILL)
		<-victim.done
	})
	for c := range clients {
		wg.Go(func() {
			cl, err := api.NewClient(api.ClientConfig{Addrs: addrs, Timeout: 10 * time.Second})
			if err != nil {
				clientErrs[c] = err
				return
			}
			defer cl.Close()
			for r, q := range reqs[c] {
				if r == gate {
					select {
					case <-killed:
					case <-subCtx.Done():
					}
				}
				backoff := 20 * time.Millisecond
				for {
					q.attempts++
					inflight.Add(1)
					res, err := cl.SubmitBody(subCtx, q.body, "application/json", api.SubmitOptions{IdempotencyKey: q.key})
					inflight.Add(-1)
					if err == nil {
						q.res = res
						acked.Add(1)
						break
					}
					q.errs = append(q.errs, err.Error())
					if s := api.ErrorCode(err); s == api.CodeInvalid || s == api.CodeTooLarge || s == api.CodeUnsupportedMedia {
						clientErrs[c] = fmt.Errorf("request %s: %w", q.key, err)
						return
					}
					if subCtx.Err() != nil {
						clientErrs[c] = fmt.Errorf("request %s not acknowledged after %d attempts; errors: %s",
							q.key, q.attempts, strings.Join(q.errs, " | "))
						return
					}
					time.Sleep(backoff)
					backoff = min(2*backoff, 500*time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	subDone := time.Since(start)
	if killErr != nil {
		t.Fatalf("killing the leader: %v", killErr)
	}
	if err := errors.Join(clientErrs...); err != nil {
		t.Fatalf("clients did not finish: %v", err)
	}
	retried, retriedExisting := 0, 0
	for _, rs := range reqs {
		for _, q := range rs {
			if q.attempts > 1 {
				retried++
				if len(q.res.Existing) > 0 {
					retriedExisting++
				}
				t.Logf("%s: %d attempts, %d of %d jobs existing; errors: %s", q.key, q.attempts, len(q.res.Existing), jobs, summarizeErrors(q.errs))
			}
		}
	}
	t.Logf("killed replica %d (the leader) with %d requests acknowledged and %d in flight; all %d acknowledged after %v; %d needed retries, %d of them found jobs already committed",
		victim.id, ackedAtKill, inflightAtKill, clients*requests, subDone.Round(time.Millisecond), retried, retriedExisting)

	// Check through the survivors, with consistent reads.
	var survivors []string
	for _, r := range reps {
		if r != victim {
			survivors = append(survivors, r.base)
		}
	}
	sc, err := api.NewClient(api.ClientConfig{Addrs: survivors, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var list []api.JobStatus
	for {
		list, err = listJobsPaged(ctx, sc, true)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("listing the jobs: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	byID := make(map[string]api.JobStatus, len(list))
	byName := make(map[string][]string, len(list))
	for _, j := range list {
		if _, dup := byID[j.ID]; dup {
			t.Errorf("job %s listed twice", j.ID)
		}
		byID[j.ID] = j
		byName[j.Spec.Name] = append(byName[j.Spec.Name], j.ID)
	}
	if len(list) != total {
		t.Errorf("%d jobs committed, want %d (clients × requests × jobs)", len(list), total)
	}
	for _, rs := range reqs {
		for _, q := range rs {
			if len(q.res.Jobs) != jobs {
				t.Errorf("%s acknowledged %d jobs, want %d", q.key, len(q.res.Jobs), jobs)
				continue
			}
			for i, id := range q.res.Jobs {
				name := failoverJobName(q.client, q.req, i)
				ids := byName[name]
				if len(ids) != 1 {
					t.Errorf("job %s (%s/%d) committed %d times: %v", name, q.key, i, len(ids), ids)
				}
				j, ok := byID[id]
				switch {
				case !ok:
					t.Errorf("%s/%d: acknowledged job %s is not committed", q.key, i, id)
				case j.Spec.Name != name:
					t.Errorf("%s/%d: acknowledged job %s is %q, want %q", q.key, i, id, j.Spec.Name, name)
				case j.Spec.IdempotencyKey != q.key+"/"+strconv.Itoa(i):
					t.Errorf("job %s (%s) has idempotency key %q, want %q", id, name, j.Spec.IdempotencyKey, q.key+"/"+strconv.Itoa(i))
				}
			}
		}
	}
	for name, ids := range byName {
		var c, r, i int
		if n, err := fmt.Sscanf(name, "c%d-r%d-j%d", &c, &r, &i); n != 3 || err != nil || c >= clients || r >= requests || i >= jobs {
			t.Errorf("unexpected job %q: %v", name, ids)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Submitting again answers the committed jobs, all existing.
	allIdx := make([]int, jobs)
	for i := range allIdx {
		allIdx[i] = i
	}
	for _, rs := range reqs {
		for _, q := range rs {
			res, err := sc.SubmitBody(ctx, q.body, "application/json", api.SubmitOptions{IdempotencyKey: q.key})
			switch {
			case err != nil:
				t.Fatalf("resubmitting %s: %v", q.key, err)
			case !slices.Equal(res.Jobs, q.res.Jobs):
				t.Errorf("resubmitting %s answered jobs %v, want %v", q.key, res.Jobs, q.res.Jobs)
			case !slices.Equal(res.Existing, allIdx):
				t.Errorf("resubmitting %s answered existing %v, want all %d", q.key, res.Existing, jobs)
			}
		}
	}
	if after, err := listJobsPaged(ctx, sc, true); err != nil || len(after) != total {
		t.Fatalf("after resubmitting: %d jobs, %v; want %d", len(after), err, total)
	}

	t.Logf("every job checked and resubmitted after %v", time.Since(start).Round(time.Millisecond))

	// The killed replica, restarted on its data, catches up.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	victim.start(t, exe)
	waitProcReady(ctx, t, victim)
	t.Logf("restarted replica %d ready after %v", victim.id, time.Since(start).Round(time.Millisecond))
	vc, err := api.NewClient(api.ClientConfig{Addrs: []string{victim.base}, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer vc.Close()
	for {
		local, err := listJobsPaged(ctx, vc, false)
		if err == nil && len(local) == total {
			ids := make([]string, len(local))
			for i, j := range local {
				ids[i] = j.ID
			}
			want := make([]string, len(list))
			for i, j := range list {
				want[i] = j.ID
			}
			if !slices.Equal(ids, want) {
				t.Fatalf("the restarted replica lists other jobs than the survivors")
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the restarted replica %d lists %d jobs (%v), want %d", victim.id, len(local), err, total)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("restarted replica %d caught up; %v in all", victim.id, time.Since(start).Round(time.Millisecond))
}
