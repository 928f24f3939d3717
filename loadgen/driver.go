package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/api"
)

// Client is what the Driver needs of the dispatcher's HTTP API;
// *api.Client implements it.
type Client interface {
	// Submit submits jobs as one request; the reply comes after commit.
	Submit(ctx context.Context, jobs []api.JobSpec, opts api.SubmitOptions) (api.SubmitResponse, error)
	// WatchBrief streams job changes after index from until ctx ends,
	// without the specs' task groups.
	WatchBrief(ctx context.Context, from uint64, fn func(api.WatchEvent) error) error
	// Tasks lists a page of a job's placed tasks.
	Tasks(ctx context.Context, jobID, after string, limit int) (api.TaskList, error)
}

var _ Client = (*api.Client)(nil)

// LabelRun is the label every job of a run carries, with the run's ID as
// its value: `sluice jobs --label loadgen-run=ID` lists a run's jobs.
const LabelRun = "loadgen-run"

// DriverConfig configures a Driver. Zero values mean the documented
// defaults.
type DriverConfig struct {
	// Client talks to the dispatcher. Required.
	Client Client
	// Workload is what to submit. Required (it must validate).
	Workload Workload
	// Submitters is how many requests may be in flight at once.
	// Default 4.
	Submitters int
	// MaxBatch is the most jobs in one request: jobs that are due
	// together (because they arrived together, or while every submitter
	// was busy) go in one request. Default 1000.
	MaxBatch int
	// Encoding compresses request bodies: "", "gzip" or "zstd".
	Encoding string
	// RunID names the run in the jobs' idempotency keys and LabelRun.
	// It must differ between runs against one cluster, or the dispatcher
	// takes the jobs for retries of the earlier run's. Default random.
	RunID string
	// Retries is how many times a failed request is sent again (with the
	// same idempotency keys) when the failure may be transient: no
	// replica reachable, unavailable, timed out, 5xx. Default 5; negative
	// means none.
	Retries int
	// RetryBackoff is the wait before the first retry; it doubles, up to
	// 2s. Default 100ms.
	RetryBackoff time.Duration
	// ProbeEvery selects the jobs whose tasks' running times are
	// measured: every ProbeEvery-th job (by sequence), while fewer than
	// MaxProbes are being measured and when it has at most MaxProbeTasks
	// tasks. Default 1 (every job that fits); negative means none.
	ProbeEvery int
	// MaxProbes bounds the jobs whose tasks are polled at once. Default
	// 32.
	MaxProbes int
	// MaxProbeTasks is the largest job probed. Default 1000.
	MaxProbeTasks int64
	// PollInterval is how often a probed job's tasks are listed: the
	// resolution of the running times. Default 10ms.
	PollInterval time.Duration
	// WatchFrom starts the watch after this raft index instead of at the
	// start of what the dispatcher keeps (0): a caller running Drivers one
	// after another against one cluster passes the last one's
	// Result.WatchIndex, so that the new run's placements are not seen
	// behind a replay of every earlier job.
	WatchFrom uint64
	// WarmUp bounds the wait, before the first job, for the watch stream
	// to deliver its first event (a cluster with jobs replays them): the
	// placements of jobs submitted before the stream is open are seen
	// late. Default 250ms; negative means none.
	WarmUp time.Duration
	// Drain bounds the wait, after the last submit, for every committed
	// task to be seen placed (and every probed one running). Default 30s.
	Drain time.Duration
	// Logger receives retries and watch reconnections. Default: discard.
	Logger *slog.Logger
	// Interval, when above 0, cuts the run's offered window (the
	// workload's duration, or until its last job for a workload of a
	// number of jobs) into intervals of this length, the last one shorter
	// when it does not divide the window, and measures each on its own:
	// Result.Intervals. Default 0: none.
	Interval time.Duration
	// OnInterval, when set, is called with each interval as it ends (with
	// Interval), from the goroutine that hands the jobs to the
	// submitters: it must return quickly, or the submits wait. Default:
	// none.
	OnInterval func(Interval)
}

// Defaults of DriverConfig.
const (
	DefaultSubmitters    = 4
	DefaultMaxBatch      = 1000
	DefaultRetries       = 5
	DefaultRetryBackoff  = 100 * time.Millisecond
	DefaultMaxProbes     = 32
	DefaultMaxProbeTasks = 1000
	DefaultPollInterval  = 10 * time.Millisecond
	DefaultDrain         = 30 * time.Second
	DefaultWarmUp        = 250 * time.Millisecond
)

// Validate reports every problem of c at once.
func (c *DriverConfig) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("loadgen: driver: "+format, args...))
	}
	if c.Client == nil {
		add("Client is required")
	}
	if err := c.Workload.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Submitters < 0 {
		add("Submitters %d must not be negative", c.Submitters)
	}
	if c.MaxBatch < 0 || c.MaxBatch > api.MaxItemsPerRequest {
		add("MaxBatch %d: want 0 (default) to %d", c.MaxBatch, api.MaxItemsPerRequest)
	}
	switch c.Encoding {
	case "", "gzip", "zstd":
	default:
		add("Encoding %q: want \"\", gzip or zstd", c.Encoding)
	}
	if len(c.RunID) > 40 || strings.ContainsFunc(c.RunID, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) {
		add("RunID %q: want at most 40 letters, digits, '-', '_' or '.'", c.RunID)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"RetryBackoff", c.RetryBackoff}, {"PollInterval", c.PollInterval}, {"Drain", c.Drain}, {"Interval", c.Interval}} {
		if d.v < 0 {
			add("%s %v must not be negative", d.name, d.v)
		}
	}
	if c.MaxProbes < 0 || c.MaxProbeTasks < 0 {
		add("MaxProbes %d and MaxProbeTasks %d must not be negative", c.MaxProbes, c.MaxProbeTasks)
	}
	return errors.Join(errs...)
}

func (c *DriverConfig) setDefaults() {
	c.Workload = c.Workload.WithDefaults()
	if c.Submitters == 0 {
		c.Submitters = DefaultSubmitters
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.RunID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		c.RunID = hex.EncodeToString(b[:])
	}
	switch {
	case c.Retries == 0:
		c.Retries = DefaultRetries
	case c.Retries < 0:
		c.Retries = 0
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.ProbeEvery == 0 {
		c.ProbeEvery = 1
	}
	if c.MaxProbes == 0 {
		c.MaxProbes = DefaultMaxProbes
	}
	if c.MaxProbeTasks == 0 {
		c.MaxProbeTasks = DefaultMaxProbeTasks
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Drain == 0 {
		c.Drain = DefaultDrain
	}
	switch {
	case c.WarmUp == 0:
		c.WarmUp = DefaultWarmUp
	case c.WarmUp < 0:
		c.WarmUp = 0
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Driver submits a workload's jobs to a cluster at their arrival times
// and measures what happens to their tasks. See the package comment for
// what it measures and how. Run it once.
type Driver struct {
	cfg    DriverConfig
	prefix string // of the jobs' idempotency keys: "lg-<run>/"

	started atomic.Bool
	p       progress // counters for Progress

	probeSlots chan struct{}
	watching   chan struct{} // closed at the first watch event
	watchOnce  sync.Once

	// mu guards the tracker.
	mu struct {
		sync.Mutex
		jobs map[int64]*jobRec // jobs submitted and not yet complete
		// Latencies, per task except lag (per job).
		lag, committed, placed, running histogram
		lastCommit, lastPlaced          time.Time
		failedTasks                     int64 // of requests that failed for good
		errSamples                      []string
		// win is what was measured since the last interval ended, when
		// DriverConfig.Interval is set.
		win window
	}
}

// window is what the Driver measures per interval, as it measures the
// run's totals: latencies per task (lag per job) and failed requests.
type window struct {
	lag, committed, placed, running histogram
	errors                          int64
}

// jobRec is what the tracker knows of a job in flight.
type jobRec struct {
	sent      time.Time // the first send of its request
	tasks     int64
	committed bool
	placed    int64 // tasks seen placed (a maximum: retries do not count twice)
	probe     bool  // its running times are being measured
	failed    bool  // its request failed for good
}

// progress holds the counters Progress reads.
type progress struct {
	jobs, tasks, committed, placed, running atomic.Int64
	requests, retries, errors, reconnects   atomic.Int64
	probeErrors, probesSkipped              atomic.Int64
	start                                   atomic.Int64 // UnixNano
	watchIndex                              atomic.Uint64
	draining                                atomic.Bool
}

// NewDriver copies cfg, fills defaults and validates it.
func NewDriver(cfg DriverConfig) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	d := &Driver{cfg: cfg, prefix: "lg-" + cfg.RunID + "/"}
	d.probeSlots = make(chan struct{}, cfg.MaxProbes)
	d.watching = make(chan struct{})
	d.mu.jobs = map[int64]*jobRec{}
	// What the generator makes, with the driver's key and label, must be
	// a job the dispatcher takes.
	it, ok := newGenerator(cfg.Workload).Next()
	if ok {
		d.prepare(&it)
		it.Job.SetDefaults()
		if err := api.ValidateJobs([]api.JobSpec{it.Job}); err != nil {
			return nil, fmt.Errorf("loadgen: driver: generated job: %w", err)
		}
	}
	return d, nil
}

// RunID returns the run's ID.
func (d *Driver) RunID() string { return d.cfg.RunID }

// prepare gives a generated job the driver's idempotency key and label.
func (d *Driver) prepare(it *Item) {
	it.Job.IdempotencyKey = d.prefix + strconv.FormatInt(it.Seq, 10)
	it.Job.Labels = map[string]string{LabelRun: d.cfg.RunID}
}

// seqOf returns the sequence of a job of this run from its idempotency key.
func (d *Driver) seqOf(key string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, d.prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil
}

// Progress is a snapshot of a run, for progress displays.
type Progress struct {
	// Elapsed is the time since the run started.
	Elapsed time.Duration
	// Draining is true once every job was submitted.
	Draining bool
	// Jobs and Tasks are those submitted (sent at least once).
	Jobs, Tasks int64
	// Committed, Placed and Running count tasks.
	Committed, Placed, Running int64
	// Errors counts requests that failed for good.
	Errors int64
}

// Progress returns the run's counters so far. It is safe to call
// concurrently with Run.
func (d *Driver) Progress() Progress {
	p := Progress{
		Draining: d.p.draining.Load(),
		Jobs:     d.p.jobs.Load(), Tasks: d.p.tasks.Load(),
		Committed: d.p.committed.Load(), Placed: d.p.placed.Load(), Running: d.p.running.Load(),
		Errors: d.p.errors.Load(),
	}
	if s := d.p.start.Load(); s != 0 {
		p.Elapsed = time.Since(time.Unix(0, s))
	}
	return p
}

// ErrAlreadyRun is returned by a second call of Run.
var ErrAlreadyRun = errors.New("loadgen: driver: Run called more than once")

// Run submits the workload and measures it until every job is submitted
// and every committed task was seen placed (and running, for probed
// jobs), or Drain passed since the last submit. When ctx ends first it
// stops at once and returns what it measured with ctx's error. Every
// goroutine it starts has ended when it returns.
func (d *Driver) Run(ctx context.Context) (Result, error) {
	if d.started.Swap(true) {
		return Result{}, ErrAlreadyRun
	}
	// The watch and the probes outlive the submitters, for the drain.
	measureCtx, stopMeasuring := context.WithCancel(ctx)
	defer stopMeasuring()
	var measure sync.WaitGroup
	measure.Go(func() { d.watch(measureCtx) })
	if d.cfg.WarmUp > 0 {
		t := time.NewTimer(d.cfg.WarmUp)
		select {
		case <-d.watching:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	start := time.Now()
	d.p.start.Store(start.UnixNano())

	reqs := make(chan []Item)
	var submit sync.WaitGroup
	var genEnd time.Duration
	var generated int64
	var ivs []Interval
	submit.Go(func() { genEnd, generated, ivs = d.schedule(ctx, start, reqs) })
	for range d.cfg.Submitters {
		submit.Go(func() {
			for batch := range reqs {
				d.send(ctx, measureCtx, &measure, batch)
			}
		})
	}
	submit.Wait()
	submitEnd := time.Now()
	d.p.draining.Store(true)

	if ctx.Err() == nil {
		d.drain(ctx)
	}
	stopMeasuring()
	measure.Wait()
	end := time.Now()
	res := d.result(start, submitEnd, end, genEnd, generated)
	res.Intervals = ivs
	if err := ctx.Err(); err != nil {
		res.Interrupted = true
		return res, err
	}
	return res, nil
}

// schedule generates the stream and hands the jobs that are due to the
// submitters, batched; it closes reqs at the end. With
// DriverConfig.Interval it also ends each interval as its end passes,
// after taking the jobs that arrived before it. It returns the offset of
// the window the jobs were offered in, their number, and the intervals.
func (d *Driver) schedule(ctx context.Context, start time.Time, reqs chan<- []Item) (time.Duration, int64, []Interval) {
	defer close(reqs)
	g := newGenerator(d.cfg.Workload)
	next, ok := g.Next()
	var pending []Item
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var n int64
	iv := d.newIntervals()
	take := func() {
		d.prepare(&next)
		pending = append(pending, next)
		n++
		if iv != nil {
			iv.offered(next.Job.Tasks[0].Count)
		}
		next, ok = g.Next()
	}
	for {
		now := time.Since(start)
		for iv != nil && !iv.done && iv.end <= now {
			for ok && next.At < iv.end {
				take()
			}
			iv.cut(iv.end)
		}
		for ok && next.At <= now {
			take()
		}
		if !ok && len(pending) == 0 {
			if iv == nil || iv.done {
				return d.window(n), n, iv.list()
			}
			if d.cfg.Workload.Duration == 0 {
				// A workload of a number of jobs ends with its last:
				// so does its last interval.
				iv.cut(now)
				return d.window(n), n, iv.list()
			}
		}
		var out chan<- []Item
		var batch []Item
		if len(pending) > 0 {
			out = reqs
			// The batch shares pending's array: pending only drops it
			// from its front and appends past its end (the capped
			// length keeps the batch's own appends off them too).
			k := min(len(pending), d.cfg.MaxBatch)
			batch = pending[:k:k]
		}
		var wake <-chan time.Time
		if at, has := nextWake(ok, next.At, iv); has {
			timer.Reset(at - now)
			wake = timer.C
		}
		select {
		case out <- batch:
			pending = pending[len(batch):]
			if len(pending) == 0 {
				pending = nil // let the backing array go
			}
		case <-wake:
		case <-ctx.Done():
			if iv != nil && !iv.done {
				iv.cut(min(time.Since(start), iv.end))
			}
			return d.window(n), n, iv.list()
		}
	}
}

// nextWake returns when schedule must wake next: at the next job's
// arrival (when there is one) or the current interval's end, whichever
// comes first.
func nextWake(haveJob bool, jobAt time.Duration, iv *intervals) (time.Duration, bool) {
	switch {
	case iv == nil || iv.done:
		return jobAt, haveJob
	case haveJob:
		return min(jobAt, iv.end), true
	default:
		return iv.end, true
	}
}

// intervals cuts a run into DriverConfig.Interval's intervals; it is
// owned by the scheduling goroutine.
type intervals struct {
	d     *Driver
	start time.Duration // of the current interval, after the run's start
	end   time.Duration // of the current interval
	done  bool          // the last interval was cut
	// The current interval's arrivals.
	jobs, tasks int64
	retries     int64      // the run's retries when the current interval began
	past        []Interval // cut so far
}

// newIntervals returns the cutter of d's intervals, nil without them.
func (d *Driver) newIntervals() *intervals {
	if d.cfg.Interval <= 0 {
		return nil
	}
	iv := &intervals{d: d}
	iv.end = iv.endOf(0)
	return iv
}

// endOf returns the end of the interval that starts at from: an Interval
// later, or the workload's end when that comes first.
func (iv *intervals) endOf(from time.Duration) time.Duration {
	end := from + iv.d.cfg.Interval
	if w := iv.d.cfg.Workload.Duration.Std(); w > 0 {
		end = min(end, w)
	}
	return end
}

// offered counts a job of tasks tasks that arrived in the current
// interval.
func (iv *intervals) offered(tasks int64) {
	iv.jobs++
	iv.tasks += tasks
}

// cut ends the current interval at at (its end, or earlier when the run
// ends first), records it, hands it to OnInterval, and begins the next
// one unless the workload's window is over.
func (iv *intervals) cut(at time.Duration) {
	d := iv.d
	d.mu.Lock()
	w := d.mu.win
	d.mu.win = window{}
	d.mu.Unlock()
	retries := d.p.retries.Load()
	out := Interval{
		Index:        len(iv.past),
		StartSeconds: iv.start.Seconds(),
		Seconds:      (at - iv.start).Seconds(),
		OfferedTasks: iv.tasks, CommittedTasks: w.committed.n, PlacedTasks: w.placed.n, RunningTasks: w.running.n,
		Latency: Latencies{Lag: w.lag.stats(), Committed: w.committed.stats(), Placed: w.placed.stats(), Running: w.running.stats()},
		Retries: retries - iv.retries,
		Errors:  w.errors,
	}
	if s := out.Seconds; s > 0 {
		out.Offered = Rate{JobsPerSec: float64(iv.jobs) / s, TasksPerSec: float64(iv.tasks) / s}
		out.Committed = Rate{TasksPerSec: float64(w.committed.n) / s}
		out.Placed = Rate{TasksPerSec: float64(w.placed.n) / s}
	}
	iv.past = append(iv.past, out)
	iv.start, iv.jobs, iv.tasks, iv.retries = at, 0, 0, retries
	if w := d.cfg.Workload.Duration.Std(); w > 0 && at >= w || at < iv.end {
		iv.done = true
	} else {
		iv.end = iv.endOf(at)
	}
	if d.cfg.OnInterval != nil {
		d.cfg.OnInterval(out)
	}
}

// list returns the intervals cut so far; nil on a nil cutter.
func (iv *intervals) list() []Interval {
	if iv == nil {
		return nil
	}
	return iv.past
}

// window returns the time over which n jobs were offered: the workload's
// duration when it ended the stream, else n jobs at the nominal rate.
func (d *Driver) window(n int64) time.Duration {
	w := d.cfg.Workload
	if w.Duration > 0 && (w.Jobs == 0 || n < w.Jobs) {
		return w.Duration.Std()
	}
	if r := w.OfferedJobRate(); r > 0 {
		return time.Duration(float64(n) / r * 1e9)
	}
	return 0
}

// send submits one batch, retrying transient failures with the same
// idempotency keys, and records the commit latencies.
func (d *Driver) send(ctx, measureCtx context.Context, measure *sync.WaitGroup, batch []Item) {
	sent := time.Now()
	specs := make([]api.JobSpec, len(batch))
	recs := make([]*jobRec, len(batch))
	var tasks int64
	d.mu.Lock()
	start := time.Unix(0, d.p.start.Load())
	for i := range batch {
		it := &batch[i]
		specs[i] = it.Job
		rec := &jobRec{sent: sent, tasks: it.Job.Tasks[0].Count}
		if d.cfg.ProbeEvery > 0 && it.Seq%int64(d.cfg.ProbeEvery) == 0 && rec.tasks <= d.cfg.MaxProbeTasks {
			select {
			case d.probeSlots <- struct{}{}:
				rec.probe = true
			default:
				d.p.probesSkipped.Add(1)
			}
		}
		recs[i] = rec
		d.mu.jobs[it.Seq] = rec
		lag := sent.Sub(start.Add(it.At))
		d.mu.lag.record(lag, 1)
		if d.cfg.Interval > 0 {
			d.mu.win.lag.record(lag, 1)
		}
		tasks += rec.tasks
	}
	d.mu.Unlock()
	d.p.jobs.Add(int64(len(batch)))
	d.p.tasks.Add(tasks)

	resp, err := d.submit(ctx, specs)
	now := time.Now()
	if err == nil && len(resp.Jobs) != len(specs) {
		err = fmt.Errorf("loadgen: submit: %d jobs sent, %d IDs in the reply", len(specs), len(resp.Jobs))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			d.p.errors.Add(1)
			d.mu.win.errors++
			d.noteErrorLocked(err)
		}
		for i, rec := range recs {
			rec.failed = true
			if ctx.Err() == nil { // else the outcome is unknown
				d.mu.failedTasks += rec.tasks
			}
			if rec.probe {
				rec.probe = false
				<-d.probeSlots
			}
			d.completeLocked(batch[i].Seq, rec)
		}
		return
	}
	d.mu.lastCommit = now
	for i, rec := range recs {
		rec.committed = true
		d.mu.committed.record(now.Sub(sent), rec.tasks)
		if d.cfg.Interval > 0 {
			d.mu.win.committed.record(now.Sub(sent), rec.tasks)
		}
		d.p.committed.Add(rec.tasks)
		if rec.probe {
			seq, id := batch[i].Seq, resp.Jobs[i]
			measure.Go(func() { d.probe(measureCtx, seq, id, rec) })
		}
		d.completeLocked(batch[i].Seq, rec)
	}
}

// submit sends one request, and again on transient failures.
func (d *Driver) submit(ctx context.Context, specs []api.JobSpec) (api.SubmitResponse, error) {
	backoff := d.cfg.RetryBackoff
	for attempt := 0; ; attempt++ {
		d.p.requests.Add(1)
		resp, err := d.cfg.Client.Submit(ctx, specs, api.SubmitOptions{Encoding: d.cfg.Encoding})
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return api.SubmitResponse{}, ctx.Err()
		}
		if attempt >= d.cfg.Retries || !transient(err) {
			return api.SubmitResponse{}, fmt.Errorf("loadgen: submit %d jobs (%d attempts): %w", len(specs), attempt+1, err)
		}
		d.p.retries.Add(1)
		d.cfg.Logger.Warn("loadgen: submit failed; retrying with the same idempotency keys", "jobs", len(specs), "retry_in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return api.SubmitResponse{}, ctx.Err()
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// transient reports whether a failed submit may succeed if sent again.
func transient(err error) bool {
	var ae *api.APIError
	if errors.As(err, &ae) {
		return api.IsUnavailable(err) || ae.Status >= 500
	}
	return true // unreachable, timed out, connection lost
}

// maxErrorSamples bounds the distinct error messages a Result keeps.
const maxErrorSamples = 5

func (d *Driver) noteErrorLocked(err error) {
	msg := err.Error()
	if len(d.mu.errSamples) < maxErrorSamples && !slices.Contains(d.mu.errSamples, msg) {
		d.mu.errSamples = append(d.mu.errSamples, msg)
	}
}

// completeLocked forgets a job once nothing more is to be measured of it.
func (d *Driver) completeLocked(seq int64, rec *jobRec) {
	if rec.failed || rec.committed && rec.placed >= rec.tasks && !rec.probe {
		delete(d.mu.jobs, seq)
	}
}

// watch follows the watch stream, resuming after the last event it saw
// whenever the stream ends, until ctx ends.
func (d *Driver) watch(ctx context.Context) {
	from := d.cfg.WatchFrom
	d.p.watchIndex.Store(from)
	backoff := d.cfg.RetryBackoff
	for ctx.Err() == nil {
		err := d.cfg.Client.WatchBrief(ctx, from, func(ev api.WatchEvent) error {
			from = ev.Index
			d.p.watchIndex.Store(from)
			backoff = d.cfg.RetryBackoff
			d.watchOnce.Do(func() { close(d.watching) })
			d.observe(ev)
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		d.p.reconnects.Add(1)
		d.cfg.Logger.Warn("loadgen: watch ended; resuming", "from", from, "retry_in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// observe takes one watch event: tasks of a job of this run that left
// pending since its last event were placed now.
func (d *Driver) observe(ev api.WatchEvent) {
	seq, ok := d.seqOf(ev.Job.Spec.IdempotencyKey)
	if !ok {
		return
	}
	c := ev.Job.Tasks
	placed := c.Total - c.Pending
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	rec := d.mu.jobs[seq]
	if rec == nil {
		return
	}
	d.placedLocked(seq, rec, placed, now)
}

// placedLocked takes an observation, at now, that placed of rec's tasks
// have been placed: those beyond the ones seen before were placed now.
func (d *Driver) placedLocked(seq int64, rec *jobRec, placed int64, now time.Time) {
	if rec.failed {
		return
	}
	k := min(placed, rec.tasks) - rec.placed
	if k <= 0 {
		return
	}
	rec.placed += k
	d.mu.placed.record(now.Sub(rec.sent), k)
	if d.cfg.Interval > 0 {
		d.mu.win.placed.record(now.Sub(rec.sent), k)
	}
	d.mu.lastPlaced = now
	d.p.placed.Add(k)
	d.completeLocked(seq, rec)
}

// probe polls a job's tasks until each was seen running (or done), and
// records when; it gives its probe slot back at the end.
func (d *Driver) probe(ctx context.Context, seq int64, jobID string, rec *jobRec) {
	defer func() {
		d.mu.Lock()
		rec.probe = false
		d.completeLocked(seq, rec)
		d.mu.Unlock()
		<-d.probeSlots
	}()
	listed := make([]bool, rec.tasks)  // placed: every listed task was
	running := make([]bool, rec.tasks) // seen running or done
	var nlisted, nrunning int64
	tick := time.NewTicker(d.cfg.PollInterval)
	defer tick.Stop()
	for {
		after := ""
		for {
			l, err := d.cfg.Client.Tasks(ctx, jobID, after, 0)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				d.p.probeErrors.Add(1)
				break
			}
			now := time.Now()
			var k int64
			for _, t := range l.Tasks {
				if t.Index < 0 || t.Index >= rec.tasks {
					continue
				}
				if !listed[t.Index] {
					listed[t.Index] = true
					nlisted++
				}
				if (t.State == api.TaskRunning || t.State.Done()) && !running[t.Index] {
					running[t.Index] = true
					k++
				}
			}
			nrunning += k
			d.mu.Lock()
			// The watch may not have told yet: the listing counts too.
			d.placedLocked(seq, rec, nlisted, now)
			d.mu.running.record(now.Sub(rec.sent), k)
			if d.cfg.Interval > 0 {
				d.mu.win.running.record(now.Sub(rec.sent), k)
			}
			d.mu.Unlock()
			d.p.running.Add(k)
			if l.Next == "" || l.Next == after {
				break
			}
			after = l.Next
		}
		if nrunning >= rec.tasks {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// drain waits until no job is in flight, Drain passed or ctx ended.
func (d *Driver) drain(ctx context.Context) {
	deadline := time.NewTimer(d.cfg.Drain)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		d.mu.Lock()
		n := len(d.mu.jobs)
		d.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
