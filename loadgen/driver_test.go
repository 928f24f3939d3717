package loadgen_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/loadgen"
)

// stub is a dispatcher as the wire sees it: submit (with idempotency
// keys), watch, and task listings. Jobs are placed placeAfter after they
// are committed, and their tasks run runAfter after that.
type stub struct {
	placeAfter, runAfter time.Duration
	// failAfterCommit answers the first n submits 503 after committing
	// them; dropWatch ends the first watch stream after that many events.
	failAfterCommit, dropWatch int

	done chan struct{}
	srv  *fasthttp.Server
	ln   net.Listener
	wg   sync.WaitGroup

	mu      sync.Mutex
	jobs    []*stubJob
	byKey   map[string]int
	events  []api.WatchEvent
	changed chan struct{}
	submits int
	watches int
	froms   []uint64 // each watch request's from
}

type stubJob struct {
	status    api.JobStatus
	committed time.Time
	placedAt  time.Time
}

func newStub(t *testing.T, placeAfter, runAfter time.Duration) *stub {
	s := &stub{placeAfter: placeAfter, runAfter: runAfter, done: make(chan struct{}),
		byKey: map[string]int{}, changed: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln = ln
	s.srv = &fasthttp.Server{Handler: s.handle}
	s.wg.Go(func() { _ = s.srv.Serve(ln) })
	s.wg.Go(s.placer)
	t.Cleanup(s.close)
	return s
}

func (s *stub) addr() string { return "http://" + s.ln.Addr().String() }

func (s *stub) close() {
	close(s.done)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.ShutdownWithContext(ctx)
	s.wg.Wait()
}

// changeLocked records a job's new state as a watch event.
func (s *stub) changeLocked(j *stubJob) {
	s.events = append(s.events, api.WatchEvent{Index: uint64(len(s.events) + 1), Job: j.status})
	close(s.changed)
	s.changed = make(chan struct{})
}

// placer places the jobs whose time has come.
func (s *stub) placer() {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		for _, j := range s.jobs {
			if j.placedAt.IsZero() && time.Since(j.committed) >= s.placeAfter {
				j.placedAt = time.Now()
				c := &j.status.Tasks
				c.Active, c.Pending = c.Total, 0
				j.status.State = api.JobRunning
				s.changeLocked(j)
			}
		}
		s.mu.Unlock()
	}
}

func (s *stub) handle(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	switch {
	case path == api.PathJobs && ctx.IsPost():
		s.submit(ctx)
	case path == api.PathWatch:
		s.watch(ctx)
	case strings.HasPrefix(path, api.PathJob) && strings.HasSuffix(path, "/tasks"):
		s.tasks(ctx, strings.TrimSuffix(strings.TrimPrefix(path, api.PathJob), "/tasks"))
	default:
		reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no such path"})
	}
}

func reply(ctx *fasthttp.RequestCtx, status int, v any) {
	b, _ := json.Marshal(v)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func (s *stub) submit(ctx *fasthttp.RequestCtx) {
	var specs []api.JobSpec
	if err := json.Unmarshal(ctx.PostBody(), &specs); err != nil {
		reply(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var resp api.SubmitResponse
	for i, sp := range specs {
		if n, ok := s.byKey[sp.IdempotencyKey]; ok && sp.IdempotencyKey != "" {
			resp.Jobs = append(resp.Jobs, s.jobs[n].status.ID)
			resp.Existing = append(resp.Existing, i)
			continue
		}
		var total int64
		for _, g := range sp.Tasks {
			total += g.Count
		}
		j := &stubJob{committed: time.Now(), status: api.JobStatus{
			ID: "j" + strconv.Itoa(len(s.jobs)+1), State: api.JobPending, Spec: sp,
			Tasks: api.TaskCounts{Total: total, Pending: total},
		}}
		s.byKey[sp.IdempotencyKey] = len(s.jobs)
		s.jobs = append(s.jobs, j)
		s.changeLocked(j)
		resp.Jobs = append(resp.Jobs, j.status.ID)
	}
	s.submits++
	if s.submits <= s.failAfterCommit {
		reply(ctx, 503, api.ErrorResponse{Code: api.CodeUnavailable, Error: "timed out waiting for commit"})
		return
	}
	reply(ctx, 200, resp)
}

func (s *stub) watch(ctx *fasthttp.RequestCtx) {
	from, _ := strconv.ParseUint(string(ctx.QueryArgs().Peek("from")), 10, 64)
	s.mu.Lock()
	s.watches++
	s.froms = append(s.froms, from)
	limit := -1
	if s.watches == 1 && s.dropWatch > 0 {
		limit = s.dropWatch
	}
	s.mu.Unlock()
	ctx.SetContentType("application/x-ndjson")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		enc := json.NewEncoder(w)
		if w.WriteByte('\n') != nil || w.Flush() != nil {
			return
		}
		for {
			s.mu.Lock()
			evs := append([]api.WatchEvent(nil), s.events[min(int(from), len(s.events)):]...)
			changed := s.changed
			s.mu.Unlock()
			for _, ev := range evs {
				if limit == 0 {
					return
				}
				limit--
				if enc.Encode(ev) != nil {
					return
				}
				from = ev.Index
			}
			if w.Flush() != nil {
				return
			}
			select {
			case <-changed:
			case <-s.done:
				return
			}
		}
	})
}

func (s *stub) tasks(ctx *fasthttp.RequestCtx, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var j *stubJob
	for _, x := range s.jobs {
		if x.status.ID == id {
			j = x
		}
	}
	if j == nil {
		reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no job " + id})
		return
	}
	var l api.TaskList
	if !j.placedAt.IsZero() {
		st := api.TaskAssigned
		if time.Since(j.placedAt) >= s.runAfter {
			st = api.TaskRunning
		}
		for i := range j.status.Tasks.Total {
			l.Tasks = append(l.Tasks, api.TaskStatus{ID: fmt.Sprintf("%s/g0/%d", id, i), Group: "g0", Index: i, State: st})
		}
	}
	reply(ctx, 200, l)
}

func (s *stub) jobCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs)
}

// client returns a client of addr that sends each request once, so that
// the driver's own retries are what a test sees.
func client(t *testing.T, addr string) *api.Client {
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{addr}, Timeout: 10 * time.Second, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestDriverAgainstStub(t *testing.T) {
	s := newStub(t, 20*time.Millisecond, 30*time.Millisecond)
	s.failAfterCommit = 2
	s.dropWatch = 5
	w := loadgen.Workload{
		Seed:      1,
		Arrival:   loadgen.Arrival{Process: loadgen.ArrivalBursts, Burst: 10, Period: api.Duration(100 * time.Millisecond)},
		Duration:  api.Duration(time.Second),
		ArraySize: loadgen.IntDist{Kind: loadgen.KindUniform, Min: 1, Max: 20},
	}
	d, err := loadgen.NewDriver(loadgen.DriverConfig{
		Client: client(t, s.addr()), Workload: w, Submitters: 2, MaxBatch: 4,
		RetryBackoff: 10 * time.Millisecond, Drain: 20 * time.Second, MaxProbes: 8,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := d.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	t.Logf("%s", b)
	if res.Jobs != 100 || s.jobCount() != 100 {
		t.Errorf("%d jobs submitted, %d in the dispatcher; want 100 each (retries must not duplicate)", res.Jobs, s.jobCount())
	}
	if res.Retries != 2 || res.Errors != 0 || res.FailedTasks != 0 {
		t.Errorf("retries %d errors %d failed tasks %d; want 2, 0, 0", res.Retries, res.Errors, res.FailedTasks)
	}
	if res.WatchReconnects < 1 {
		t.Errorf("the watch was dropped, but %d reconnects", res.WatchReconnects)
	}
	if res.CommittedTasks != res.Tasks || res.PlacedTasks != res.Tasks || res.UnplacedTasks != 0 {
		t.Errorf("tasks %d committed %d placed %d unplaced %d", res.Tasks, res.CommittedTasks, res.PlacedTasks, res.UnplacedTasks)
	}
	// Requests batch at most 4 jobs: 10 jobs per burst need at least 3.
	if res.Requests < 30+2 {
		t.Errorf("%d requests for 10 bursts of 10 jobs in batches of 4", res.Requests)
	}
	l := res.Latency
	if l.Placed.Count != res.Tasks || l.Placed.P50Ms < 20 || l.Placed.MaxMs < l.Placed.P99Ms || l.Placed.P99Ms < l.Placed.P50Ms {
		t.Errorf("placed latency %+v: want every task, at least the stub's 20ms", l.Placed)
	}
	if l.Committed.Count != res.Tasks || l.Committed.P50Ms > l.Placed.P50Ms {
		t.Errorf("committed latency %+v (placed %+v)", l.Committed, l.Placed)
	}
	if l.Running.Count == 0 || l.Running.Count != res.RunningTasks || l.Running.P50Ms < 50 {
		t.Errorf("running latency %+v: want probed tasks, at least 20+30ms", l.Running)
	}
	if l.Lag.Count != 100 {
		t.Errorf("lag counted %d jobs", l.Lag.Count)
	}
	if res.Offered.JobsPerSec != 100 || res.Offered.TasksPerSec <= 0 || res.Placed.TasksPerSec <= 0 {
		t.Errorf("offered %+v placed %+v", res.Offered, res.Placed)
	}
	if _, err := d.Run(ctx); err != loadgen.ErrAlreadyRun {
		t.Errorf("second Run: %v", err)
	}
}

// TestDriverWatchFrom: a run reports where its watch ended, and a run
// given it as WatchFrom starts its watch there instead of replaying the
// earlier run's jobs, and still sees its own placed.
func TestDriverWatchFrom(t *testing.T) {
	s := newStub(t, 5*time.Millisecond, 5*time.Millisecond)
	w := loadgen.Workload{Seed: 3, Arrival: loadgen.Arrival{Process: loadgen.ArrivalBursts, Burst: 5, Period: api.Duration(50 * time.Millisecond)},
		Duration: api.Duration(200 * time.Millisecond), ArraySize: loadgen.Fixed(2)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var from uint64
	for run := range 2 {
		d, err := loadgen.NewDriver(loadgen.DriverConfig{Client: client(t, s.addr()), Workload: w, RunID: fmt.Sprint("r", run),
			WatchFrom: from, RetryBackoff: 10 * time.Millisecond, Drain: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		watches := len(s.froms)
		s.mu.Unlock()
		res, err := d.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		first, events := s.froms[watches], uint64(len(s.events))
		s.mu.Unlock()
		if first != from || res.PlacedTasks != res.Tasks || res.Tasks == 0 {
			t.Errorf("run %d: watch from %d (want %d), %d of %d tasks placed", run, first, from, res.PlacedTasks, res.Tasks)
		}
		if res.WatchIndex == 0 || res.WatchIndex > events {
			t.Errorf("run %d: watch index %d, %d events", run, res.WatchIndex, events)
		}
		from = res.WatchIndex
	}
}

func TestDriverErrorsAndInterrupt(t *testing.T) {
	// A dispatcher that refuses everything as invalid: no retry, every
	// request an error.
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == api.PathWatch {
			ctx.SetStatusCode(200)
			return
		}
		reply(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: "no"})
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	defer func() { _ = srv.Shutdown(); wg.Wait() }()
	d, err := loadgen.NewDriver(loadgen.DriverConfig{
		Client:   client(t, "http://"+ln.Addr().String()),
		Workload: loadgen.Workload{Jobs: 5, Arrival: loadgen.Arrival{Rate: 100}}, RetryBackoff: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors == 0 || res.Retries != 0 || res.FailedTasks != 5 || res.CommittedTasks != 0 || len(res.ErrorSamples) != 1 {
		t.Errorf("result %+v", res)
	}

	// Interrupted: Run returns promptly with what it has.
	s := newStub(t, time.Hour, 0)
	d, err = loadgen.NewDriver(loadgen.DriverConfig{Client: client(t, s.addr()),
		Workload: loadgen.Workload{Duration: api.Duration(time.Hour), Arrival: loadgen.Arrival{Rate: 50}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	startRun := time.Now()
	res, err = d.Run(ctx)
	if err == nil || !res.Interrupted || res.Jobs == 0 || time.Since(startRun) > 10*time.Second {
		t.Errorf("interrupted run: %v, %+v after %v", err, res, time.Since(startRun))
	}
}

func TestDriverConfigValidate(t *testing.T) {
	_, err := loadgen.NewDriver(loadgen.DriverConfig{Encoding: "br", MaxBatch: -1, RunID: "a b", PollInterval: -1})
	if err == nil {
		t.Fatal("NewDriver took a bad config")
	}
	for _, want := range []string{"Client is required", "duration, jobs", "MaxBatch", "Encoding", "RunID", "PollInterval"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestDriverIntervals: with Interval, the offered window is cut into
// intervals that each count the arrivals of their time and what was seen
// in them; OnInterval gets each as it ends, the same as the Result's.
func TestDriverIntervals(t *testing.T) {
	s := newStub(t, 20*time.Millisecond, 10*time.Millisecond)
	w := loadgen.Workload{Seed: 4, Arrival: loadgen.Arrival{Rate: 100}, Duration: api.Duration(time.Second), ArraySize: loadgen.Fixed(2)}
	var got []loadgen.Interval
	var mu sync.Mutex
	d, err := loadgen.NewDriver(loadgen.DriverConfig{Client: client(t, s.addr()), Workload: w, Interval: 300 * time.Millisecond,
		OnInterval: func(iv loadgen.Interval) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, iv)
		},
		RetryBackoff: 10 * time.Millisecond, Drain: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := d.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(res.Intervals, "", "  ")
	t.Logf("%s", b)
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(got, res.Intervals) {
		t.Errorf("OnInterval got %+v\nthe result has %+v", got, res.Intervals)
	}
	// 0–300, 300–600, 600–900 and 900–1000 ms.
	wantSeconds := []float64{0.3, 0.3, 0.3, 0.1}
	if len(res.Intervals) != len(wantSeconds) {
		t.Fatalf("%d intervals, want %d", len(res.Intervals), len(wantSeconds))
	}
	var offered, placed, running int64
	start := 0.0
	for i, iv := range res.Intervals {
		if iv.Index != i || math.Abs(iv.StartSeconds-start) > 1e-9 || math.Abs(iv.Seconds-wantSeconds[i]) > 1e-9 {
			t.Errorf("interval %d: index %d, from %v s for %v s; want from %v for %v", i, iv.Index, iv.StartSeconds, iv.Seconds, start, wantSeconds[i])
		}
		start += wantSeconds[i]
		// 100 jobs a second of 2 tasks, arriving evenly.
		if jobs := 100 * wantSeconds[i]; math.Abs(float64(iv.OfferedTasks)/2-jobs) > 1 ||
			math.Abs(iv.Offered.TasksPerSec-float64(iv.OfferedTasks)/iv.Seconds) > 1e-6 {
			t.Errorf("interval %d: %d tasks offered (%v/s), want %v jobs of 2", i, iv.OfferedTasks, iv.Offered.TasksPerSec, jobs)
		}
		if iv.Latency.Placed.Count != iv.PlacedTasks || iv.Latency.Running.Count != iv.RunningTasks ||
			iv.Latency.Committed.Count != iv.CommittedTasks || iv.Errors != 0 {
			t.Errorf("interval %d: counts %+v and latencies %+v disagree", i, iv, iv.Latency)
		}
		if iv.PlacedTasks > 0 && iv.Latency.Placed.P50Ms < 20 {
			t.Errorf("interval %d: placed p50 %v ms, below the stub's 20 ms", i, iv.Latency.Placed.P50Ms)
		}
		offered, placed, running = offered+iv.OfferedTasks, placed+iv.PlacedTasks, running+iv.RunningTasks
	}
	if offered != res.Tasks || placed > res.PlacedTasks || placed < res.PlacedTasks-20 || running > res.RunningTasks {
		t.Errorf("intervals: %d offered, %d placed, %d running; the run: %d tasks, %d placed, %d running (the drain's in none)",
			offered, placed, running, res.Tasks, res.PlacedTasks, res.RunningTasks)
	}
	for i := range 3 {
		if iv := res.Intervals[i]; iv.PlacedTasks < 40 || iv.Placed.TasksPerSec != float64(iv.PlacedTasks)/iv.Seconds {
			t.Errorf("interval %d: %d placed (%v/s), want most of its 60 arrivals", i, iv.PlacedTasks, iv.Placed.TasksPerSec)
		}
	}

	// A workload of a number of jobs ends its last interval with its last
	// job; an interrupted run with the interruption.
	for _, tc := range []struct {
		name    string
		w       loadgen.Workload
		timeout time.Duration
	}{
		{"jobs", loadgen.Workload{Seed: 1, Arrival: loadgen.Arrival{Rate: 100}, Jobs: 25, ArraySize: loadgen.Fixed(1)}, time.Minute},
		{"interrupted", loadgen.Workload{Seed: 1, Arrival: loadgen.Arrival{Rate: 100}, Duration: api.Duration(time.Hour), ArraySize: loadgen.Fixed(1)}, 350 * time.Millisecond},
	} {
		d, err := loadgen.NewDriver(loadgen.DriverConfig{Client: client(t, s.addr()), Workload: tc.w, Interval: 100 * time.Millisecond,
			RetryBackoff: 10 * time.Millisecond, Drain: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
		res, _ := d.Run(ctx)
		cancel()
		ivs := res.Intervals
		if len(ivs) < 2 {
			t.Fatalf("%s: %d intervals: %+v", tc.name, len(ivs), ivs)
		}
		var offered int64
		for i, iv := range ivs {
			offered += iv.OfferedTasks
			if i < len(ivs)-1 && math.Abs(iv.Seconds-0.1) > 1e-9 || iv.Seconds > 0.1+1e-9 || iv.Seconds <= 0 {
				t.Errorf("%s: interval %d of %d lasts %v s", tc.name, i, len(ivs), iv.Seconds)
			}
		}
		if offered != res.Tasks {
			t.Errorf("%s: %d tasks offered in the intervals, %d in the run", tc.name, offered, res.Tasks)
		}
	}
}
