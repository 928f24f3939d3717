package chaosbench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluicehq/sluice/api"
)

// Labels every job of a run carries.
const (
	LabelRun  = "chaos-run"  // the run's ID
	LabelKey  = "chaos-key"  // the job's idempotency key
	LabelKind = "chaos-kind" // kindShort or kindLong
)

// Job kinds: a short job runs its tasks for a moment and is never
// cancelled; a long job's task would run for an hour and is cancelled by
// the workload (or at the end of the load).
const (
	kindShort = "short"
	kindLong  = "long"
)

// longRunTime is the simulated run time of a long job's task: longer than
// any run, so that it ends only by its cancel.
const longRunTime = time.Hour

// opKind is the kind of a recorded operation.
type opKind int

const (
	opSubmit opKind = iota
	opGet
	opCancel
)

func (k opKind) String() string {
	return [...]string{"submit", "get", "cancel"}[k]
}

// opInput is what an operation asked, about one key.
type opInput struct {
	Kind opKind
	Key  string
}

// opOutput is what it was answered. Unknown: no answer (the operation
// may or may not have taken effect). For a submit, ID; for a get, Count
// jobs of the key, ID and State of the first.
type opOutput struct {
	Unknown bool
	ID      string
	Count   int
	State   api.JobState
}

// submitted is a key the workload submitted: its ID once acknowledged.
type submitted struct {
	key, kind string
	id        string
	acked     bool
	cancelled bool // a cancel of it was answered
}

// workload submits, reads and cancels keyed jobs through one client and
// records every operation. Its methods are safe for concurrent use.
type workload struct {
	c      *api.Client
	runID  string
	pool   string
	start  time.Time
	ackTry time.Duration // how long a submit is retried before it counts as unknown

	mu    sync.Mutex
	ops   []porcupine.Operation
	keys  []*submitted
	byKey map[string]*submitted
	seq   int
	fails int // answered errors of any operation (each attempt)
}

func newWorkload(c *api.Client, runID, pool string, ackTry time.Duration) *workload {
	return &workload{c: c, runID: runID, pool: pool, start: time.Now(), ackTry: ackTry, byKey: map[string]*submitted{}}
}

func (w *workload) now() int64 { return int64(time.Since(w.start)) }

func (w *workload) record(client int, in opInput, call int64, out opOutput) {
	ret := w.now()
	if out.Unknown {
		ret = math.MaxInt64
	}
	w.mu.Lock()
	w.ops = append(w.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	w.mu.Unlock()
}

// jobSpec is the job of key: short (tasks tasks of runTime) or long.
func (w *workload) jobSpec(key, kind string, tasks int64, runTime time.Duration) api.JobSpec {
	if kind == kindLong {
		tasks, runTime = 1, longRunTime
	}
	return api.JobSpec{
		Name: "chaos", Pool: w.pool, IdempotencyKey: key,
		Labels: map[string]string{LabelRun: w.runID, LabelKey: key, LabelKind: kind},
		Retry:  api.RetryPolicy{MaxAttempts: 20, Backoff: api.Duration(100 * time.Millisecond), MaxBackoff: api.Duration(time.Second)},
		Tasks: []api.TaskGroupSpec{{Count: tasks, Pod: api.PodSpec{
			Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/chaos"}, Command: []string{"/chaos"}, Resources: api.Resources{CPU: 100, Memory: 64 << 20}}},
			Sim:        &api.SimSpec{RunTime: api.Duration(runTime)},
		}}},
	}
}

// submit submits a new job, resending it with its key until it is
// acknowledged or ackTry passes (then its outcome is unknown). It returns
// the job's ID once acknowledged.
func (w *workload) submit(ctx context.Context, client int, kind string, tasks int64, runTime time.Duration) (string, bool) {
	w.mu.Lock()
	w.seq++
	key := fmt.Sprintf("%s/%d", w.runID, w.seq)
	s := &submitted{key: key, kind: kind}
	w.keys = append(w.keys, s)
	w.byKey[key] = s
	w.mu.Unlock()
	spec := w.jobSpec(key, kind, tasks, runTime)
	call := w.now()
	deadline := time.Now().Add(w.ackTry)
	for {
		res, err := w.c.Submit(ctx, []api.JobSpec{spec}, api.SubmitOptions{})
		if err == nil && len(res.Jobs) == 1 {
			w.mu.Lock()
			s.id, s.acked = res.Jobs[0], true
			w.mu.Unlock()
			w.record(client, opInput{Kind: opSubmit, Key: key}, call, opOutput{ID: res.Jobs[0]})
			return res.Jobs[0], true
		}
		w.countFail()
		if ctx.Err() != nil || time.Now().After(deadline) {
			w.record(client, opInput{Kind: opSubmit, Key: key}, call, opOutput{Unknown: true})
			return "", false
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

func (w *workload) countFail() {
	w.mu.Lock()
	w.fails++
	w.mu.Unlock()
}

// get reads key's jobs with a consistent read. A failed read changed
// nothing and is not recorded.
func (w *workload) get(ctx context.Context, client int, key string) {
	call := w.now()
	list, err := w.c.Jobs(ctx, api.JobQuery{Labels: map[string]string{LabelKey: key}, Consistent: true})
	if err != nil {
		w.countFail()
		return
	}
	out := opOutput{Count: len(list.Jobs)}
	if len(list.Jobs) > 0 {
		out.ID, out.State = list.Jobs[0].ID, list.Jobs[0].State
	}
	w.record(client, opInput{Kind: opGet, Key: key}, call, out)
}

// cancel cancels s's job, whose ID is known: it was acknowledged, or
// found listed (cancelUnacked).
func (w *workload) cancel(ctx context.Context, client int, s *submitted) {
	w.mu.Lock()
	id := s.id
	w.mu.Unlock()
	call := w.now()
	_, err := w.c.Cancel(ctx, id)
	if err != nil {
		w.countFail()
		w.record(client, opInput{Kind: opCancel, Key: s.key}, call, opOutput{Unknown: true})
		return
	}
	w.mu.Lock()
	s.cancelled = true
	w.mu.Unlock()
	w.record(client, opInput{Kind: opCancel, Key: s.key}, call, opOutput{ID: id})
}

// pick returns a random submitted key, or a random acknowledged long job
// not yet cancelled when long is set; nil when there is none.
func (w *workload) pick(rng *rand.Rand, long bool) *submitted {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !long {
		if len(w.keys) == 0 {
			return nil
		}
		return w.keys[rng.IntN(len(w.keys))]
	}
	var cands []*submitted
	for _, s := range w.keys {
		if s.kind == kindLong && s.acked && !s.cancelled {
			cands = append(cands, s)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[rng.IntN(len(cands))]
}

// run is one client of the workload: until ctx ends, an operation every
// interval: a submit (half the time; a fifth of them long jobs), a get of
// any key, or a cancel of a long job.
func (w *workload) run(ctx context.Context, client int, seed uint64, interval time.Duration, maxTasks int64, runTime time.Duration) {
	rng := rand.New(rand.NewPCG(seed, uint64(client)))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r := rng.Float64()
		switch {
		case r < 0.5:
			kind := kindShort
			if rng.Float64() < 0.2 {
				kind = kindLong
			}
			w.submit(ctx, client, kind, 1+rng.Int64N(maxTasks), runTime/2+time.Duration(rng.Int64N(int64(runTime)+1)))
		case r < 0.9:
			if s := w.pick(rng, false); s != nil {
				w.get(ctx, client, s.key)
			}
		default:
			if s := w.pick(rng, true); s != nil {
				w.cancel(ctx, client, s)
			}
		}
	}
}

// finish cancels every acknowledged long job not yet cancelled, then
// reads at most maxReads keys spread evenly over all (each read is a
// consistent listing by label), as client number client; it stops early
// when ctx ends. The final tally lists every key anyway: these reads put
// the end state into the history that is checked for linearizability.
func (w *workload) finish(ctx context.Context, client, maxReads int) {
	w.mu.Lock()
	keys := append([]*submitted(nil), w.keys...)
	w.mu.Unlock()
	for _, s := range keys {
		w.mu.Lock()
		need := s.kind == kindLong && s.acked && !s.cancelled
		w.mu.Unlock()
		for try := 0; need && try < 20 && ctx.Err() == nil; try++ {
			w.cancel(ctx, client, s)
			w.mu.Lock()
			need = !s.cancelled
			w.mu.Unlock()
			if need {
				sleepCtx(ctx, 200*time.Millisecond)
			}
		}
	}
	step := max(1, len(keys)/max(1, maxReads))
	for i := 0; i < len(keys) && ctx.Err() == nil; i += step {
		w.get(ctx, client, keys[i].key)
	}
}

// cancelUnacked cancels the unfinished long jobs of jobs that a submit
// whose answer was lost created: finish cancels only the acknowledged
// ones, whose IDs it knows, and such a job would otherwise run on.
func (w *workload) cancelUnacked(ctx context.Context, client int, jobs []api.JobStatus) {
	w.mu.Lock()
	byKey := make(map[string]*submitted, len(w.keys))
	for _, s := range w.keys {
		byKey[s.key] = s
	}
	w.mu.Unlock()
	for _, j := range jobs {
		if terminal(j.State) || j.Spec.Labels[LabelKind] != kindLong {
			continue
		}
		s := byKey[j.Spec.Labels[LabelKey]]
		w.mu.Lock()
		skip := s == nil || s.acked || s.cancelled
		if !skip {
			s.id = j.ID
		}
		w.mu.Unlock()
		if !skip {
			w.cancel(ctx, client, s)
		}
	}
}

// history returns a copy of the recorded operations and the submitted
// keys.
func (w *workload) history() ([]porcupine.Operation, []submitted, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]submitted, len(w.keys))
	for i, s := range w.keys {
		keys[i] = *s
	}
	return append([]porcupine.Operation(nil), w.ops...), keys, w.fails
}

// probe is one probe job: when its submit was called and when it was
// first seen placed (zero if never).
type probe struct {
	call, placed time.Time
}

// maxProbes bounds the probes followed at once.
const maxProbes = 256

// prober submits a one-task job every interval, as client number client,
// and follows each until it is seen placed (a task active or done), for
// at most follow. Until ctx ends; it returns after every probe it
// started ended.
type prober struct {
	w        *workload
	client   int
	interval time.Duration
	follow   time.Duration
	runTime  time.Duration

	mu     sync.Mutex
	probes []*probe
}

func (p *prober) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, maxProbes)
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // as many probes followed as allowed: skip this one
		}
		pr := &probe{call: time.Now()}
		p.mu.Lock()
		p.probes = append(p.probes, pr)
		p.mu.Unlock()
		wg.Go(func() {
			defer func() { <-sem }()
			p.follow1(ctx, pr)
		})
	}
}

// follow1 submits pr's job and polls it until it is seen placed.
func (p *prober) follow1(ctx context.Context, pr *probe) {
	id, ok := p.w.submit(ctx, p.client, kindShort, 1, p.runTime)
	if !ok {
		return
	}
	deadline := pr.call.Add(p.follow)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		j, err := p.w.c.Job(ctx, id)
		if err == nil && (j.Tasks.Active > 0 || j.Tasks.Succeeded > 0 || j.Tasks.Failed > 0 || j.Tasks.Killed > 0) {
			p.mu.Lock()
			pr.placed = time.Now()
			p.mu.Unlock()
			return
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
}

// longestWait returns the longest time from submit to placement of the
// probes called within [from, to]; a probe never placed counts as
// waiting until end. ok is false when no probe was called then.
func (p *prober) longestWait(from, to, end time.Time) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var longest time.Duration
	ok := false
	for _, pr := range p.probes {
		if pr.call.Before(from) || pr.call.After(to) {
			continue
		}
		placed := pr.placed
		if placed.IsZero() {
			placed = end
		}
		longest, ok = max(longest, placed.Sub(pr.call)), true
	}
	return longest, ok
}

// firstPlacedAfter returns the earliest placement of a probe called at or
// after t, if any.
func (p *prober) firstPlacedAfter(t time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best time.Time
	for _, pr := range p.probes {
		if pr.call.Before(t) || pr.placed.IsZero() {
			continue
		}
		if best.IsZero() || pr.placed.Before(best) {
			best = pr.placed
		}
	}
	return best, !best.IsZero()
}
