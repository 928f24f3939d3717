package appmaster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
)

// EnvJob is the environment variable that names the appmaster's job in
// cluster mode: the job's task runs the appmaster's program, and the node
// sets it, as api.EnvJobID, in every container.
const EnvJob = api.EnvJobID

// ErrNoJob is returned by Attach in cluster mode when EnvJob is not set.
var ErrNoJob = errors.New("appmaster: no appmaster job: " + EnvJob + " is not set")

// ErrNoEnv is wrapped by the error of AttachFromEnv when a variable of the
// environment a node gives an appmaster's pod is not set; the error names
// each one missing.
var ErrNoEnv = errors.New("appmaster: not in an appmaster job's pod")

// Handler is told about one capbox set's capboxes. Its methods run one at
// a time on the goroutine of Run, in the order the changes were seen; a
// slow handler delays the others.
type Handler interface {
	// CapboxRunning is called once when a capbox is ready for tasks.
	CapboxRunning(api.CapboxStatus)
	// CapboxCompleted is called once when a capbox has ended: released,
	// failed or lost (also when it ends before it ever ran).
	CapboxCompleted(api.CapboxStatus)
}

// TaskHandler is told how one task in a capbox fares, as Handler is.
type TaskHandler interface {
	// TaskRunning is called once when the task runs.
	TaskRunning(api.CapTaskStatus)
	// TaskCompleted is called once when it has ended: succeeded, failed,
	// killed (stopped, or its capbox ended) or lost.
	TaskCompleted(api.CapTaskStatus)
}

// Config configures an Appmaster.
type Config struct {
	// Client calls the dispatcher.
	Client *api.Client
	// RetryMin and RetryMax bound the wait before Run watches again after
	// the stream broke. Defaults 50 ms and 5 s.
	RetryMin, RetryMax time.Duration
	// Clock times those waits. Default the system clock.
	Clock clock.Clock
}

// Appmaster is an appmaster's session with the dispatcher: it leases
// capboxes for its job and tells their handlers how they fare.
type Appmaster struct {
	cfg Config
	job string
	// ownClient is set when AttachFromEnv made cfg.Client: Close closes it.
	ownClient bool
	mu        struct {
		sync.Mutex
		handlers map[string]Handler         // by capbox set ID
		seen     map[string]api.CapboxState // the last state told, by capbox ID
		tasks    map[string]TaskHandler     // by capbox task ID
		taskSeen map[string]api.TaskState   // the last state told, by capbox task ID
	}
	// kick wakes Run after a create, so that it looks at the new sets
	// without waiting for their first change.
	kick chan struct{}
}

func (c *Config) setDefaults() {
	if c.RetryMin <= 0 {
		c.RetryMin = 50 * time.Millisecond
	}
	if c.RetryMax < c.RetryMin {
		c.RetryMax = max(5*time.Second, c.RetryMin)
	}
	c.Clock = clock.OrSystem(c.Clock)
}

func newAppmaster(cfg Config, job string) *Appmaster {
	cfg.setDefaults()
	a := &Appmaster{cfg: cfg, job: job, kick: make(chan struct{}, 1)}
	a.mu.handlers = map[string]Handler{}
	a.mu.seen = map[string]api.CapboxState{}
	a.mu.tasks = map[string]TaskHandler{}
	a.mu.taskSeen = map[string]api.TaskState{}
	return a
}

// Register starts an appmaster in client mode: it submits spec as an
// appmaster job (Appmaster is set for it; spec may have no task groups)
// and returns the session. The job lives until Stop cancels it.
func Register(ctx context.Context, cfg Config, spec api.JobSpec) (*Appmaster, error) {
	if cfg.Client == nil {
		return nil, errors.New("appmaster: Config.Client is nil")
	}
	spec.Appmaster = true
	res, err := cfg.Client.Submit(ctx, []api.JobSpec{spec}, api.SubmitOptions{})
	if err != nil {
		return nil, fmt.Errorf("appmaster: register: %w", err)
	}
	return newAppmaster(cfg, res.Jobs[0]), nil
}

// AttachFromEnv attaches an appmaster in cluster mode, its program
// running in a pod of its job, from the environment its node gives that
// pod: the dispatcher's URLs (api.EnvAddr, comma-separated), the job's
// token (api.EnvToken) and its ID (api.EnvJobID). It makes cfg.Client,
// which must be nil, from the first two; Close closes it. A variable
// that is not set fails it with an error that wraps ErrNoEnv (and
// ErrNoJob for api.EnvJobID) and names each one missing. Recovery is as
// Attach's.
func AttachFromEnv(ctx context.Context, cfg Config, recover func(api.CapboxStatus) Handler) (*Appmaster, error) {
	if cfg.Client != nil {
		return nil, errors.New("appmaster: attach from the environment: Config.Client must be nil, it is made from " + api.EnvAddr + " and " + api.EnvToken)
	}
	addr, token, job := os.Getenv(api.EnvAddr), os.Getenv(api.EnvToken), os.Getenv(api.EnvJobID)
	var missing []string
	for _, v := range []struct{ name, value string }{{api.EnvAddr, addr}, {api.EnvToken, token}, {api.EnvJobID, job}} {
		if v.value == "" {
			missing = append(missing, v.name)
		}
	}
	if len(missing) > 0 {
		return nil, &envError{job: job == "", msg: fmt.Sprintf(
			"%s: %s not set (a node sets them in the pods of an appmaster job's task groups; %s only when the dispatcher makes job tokens, with --job-token-key)",
			ErrNoEnv, strings.Join(missing, ", "), api.EnvToken)}
	}
	var addrs []string
	for a := range strings.SplitSeq(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	client, err := api.NewClient(api.ClientConfig{Addrs: addrs, Token: token})
	if err != nil {
		return nil, fmt.Errorf("appmaster: attach from the environment: %s: %w", api.EnvAddr, err)
	}
	cfg.Client = client
	a, err := Attach(ctx, cfg, job, recover)
	if err != nil {
		client.Close()
		return nil, err
	}
	a.ownClient = true
	return a, nil
}

// envError is AttachFromEnv's error for variables not set: ErrNoEnv, and
// ErrNoJob when the job's ID is one of them.
type envError struct {
	msg string
	job bool
}

func (e *envError) Error() string { return e.msg }

func (e *envError) Is(target error) bool { return target == ErrNoEnv || e.job && target == ErrNoJob }

// Close closes the client AttachFromEnv made; it does nothing to an
// appmaster given its Config.Client. It does not end the job.
func (a *Appmaster) Close() {
	if a.ownClient {
		a.cfg.Client.Close()
	}
}

// Attach resumes an appmaster whose job exists: in cluster mode (job "",
// read from EnvJob) or after the appmaster restarted. Every capbox it
// still has that has not ended is offered to recover: the handler it
// returns is told about that capbox's set from then on, and a capbox for
// which it returns nil is released (dropped). A recovered handler that is
// also a TaskHandler is told about the tasks in its capboxes. With no
// Config.Client and job "", it is AttachFromEnv.
func Attach(ctx context.Context, cfg Config, job string, recover func(api.CapboxStatus) Handler) (*Appmaster, error) {
	if cfg.Client == nil {
		if job == "" {
			return AttachFromEnv(ctx, cfg, recover)
		}
		return nil, errors.New("appmaster: Config.Client is nil")
	}
	if job == "" {
		if job = os.Getenv(EnvJob); job == "" {
			return nil, ErrNoJob
		}
	}
	a := newAppmaster(cfg, job)
	list, err := cfg.Client.Capboxes(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("appmaster: attach to %s: %w", job, err)
	}
	var drop []string
	for _, b := range list.Capboxes {
		if b.State.Done() {
			a.mu.seen[b.ID] = b.State
			continue
		}
		h, ok := a.mu.handlers[b.Set]
		if !ok && recover != nil {
			h = recover(b)
		}
		if h == nil {
			drop = append(drop, b.ID)
			continue
		}
		a.mu.handlers[b.Set] = h
		if b.State == api.CapboxRunning {
			a.mu.seen[b.ID] = b.State // recover was told
		}
	}
	if len(drop) > 0 {
		if _, err := cfg.Client.ReleaseCapboxes(ctx, job, drop...); err != nil {
			return nil, fmt.Errorf("appmaster: attach to %s: drop %d capboxes: %w", job, len(drop), err)
		}
	}
	return a, nil
}

// Job returns the appmaster's job ID.
func (a *Appmaster) Job() string { return a.job }

// CreateCapboxes asks for the capboxes of req and returns the ID of the
// capbox set it made; h is told how each of them fares (once Run runs).
// Give req an IdempotencyKey to make a retry after an error safe.
func (a *Appmaster) CreateCapboxes(ctx context.Context, req api.CapboxRequest, h Handler) (string, error) {
	if h == nil {
		return "", errors.New("appmaster: create capboxes: nil handler")
	}
	res, err := a.cfg.Client.CreateCapboxes(ctx, a.job, []api.CapboxRequest{req})
	if err != nil {
		return "", fmt.Errorf("appmaster: create capboxes %q: %w", req.Name, err)
	}
	set := res.Sets[0]
	a.mu.Lock()
	a.mu.handlers[set] = h
	a.mu.Unlock()
	a.wake()
	return set, nil
}

// StartTask starts a task named name in a running capbox of the
// appmaster's, inside the capbox's resources, and returns its ID; h is
// told how it fares (once Run runs). Starting a name the capbox has
// already is answered with that task's ID, so a retry is safe.
func (a *Appmaster) StartTask(ctx context.Context, capbox, name string, pod api.PodSpec, h TaskHandler) (string, error) {
	if h == nil {
		return "", errors.New("appmaster: start task: nil handler")
	}
	res, err := a.cfg.Client.StartCapTasks(ctx, a.job, []api.CapTaskSpec{{Capbox: capbox, Name: name, Pod: pod}})
	if err != nil {
		return "", fmt.Errorf("appmaster: start task %q in %s: %w", name, capbox, err)
	}
	id := res.Tasks[0]
	a.mu.Lock()
	a.mu.tasks[id] = h
	a.mu.Unlock()
	a.wake()
	return id, nil
}

// StopTasks stops tasks in the appmaster's capboxes by ID; their handlers
// are told when they have ended.
func (a *Appmaster) StopTasks(ctx context.Context, ids ...string) error {
	if _, err := a.cfg.Client.StopCapTasks(ctx, a.job, ids...); err != nil {
		return fmt.Errorf("appmaster: stop tasks: %w", err)
	}
	return nil
}

// Tasks lists the tasks of one of the appmaster's capboxes.
func (a *Appmaster) Tasks(ctx context.Context, capbox string) ([]api.CapTaskStatus, error) {
	boxes, err := a.Capboxes(ctx)
	if err != nil {
		return nil, err
	}
	for _, b := range boxes {
		if b.ID == capbox {
			return b.Tasks, nil
		}
	}
	return nil, fmt.Errorf("appmaster: appmaster %s has no capbox %q", a.job, capbox)
}

// wake makes Run look at the capboxes without waiting for a change.
func (a *Appmaster) wake() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Release releases capboxes by ID; their handlers are told when they
// have ended.
func (a *Appmaster) Release(ctx context.Context, ids ...string) error {
	if _, err := a.cfg.Client.ReleaseCapboxes(ctx, a.job, ids...); err != nil {
		return fmt.Errorf("appmaster: release: %w", err)
	}
	return nil
}

// Capboxes lists the appmaster's capboxes as the dispatcher has them.
func (a *Appmaster) Capboxes(ctx context.Context) ([]api.CapboxStatus, error) {
	list, err := a.cfg.Client.Capboxes(ctx, a.job)
	if err != nil {
		return nil, fmt.Errorf("appmaster: list capboxes: %w", err)
	}
	return list.Capboxes, nil
}

// Nodes returns a snapshot of the cluster's nodes.
func (a *Appmaster) Nodes(ctx context.Context) ([]api.NodeInfo, error) {
	l, err := a.cfg.Client.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("appmaster: nodes: %w", err)
	}
	return l.Nodes, nil
}

// Stop ends the appmaster: its job is cancelled, which releases every
// capbox it holds.
func (a *Appmaster) Stop(ctx context.Context) error {
	if _, err := a.cfg.Client.Cancel(ctx, a.job); err != nil {
		return fmt.Errorf("appmaster: stop %s: %w", a.job, err)
	}
	return nil
}

// Run listens to the dispatcher's state changes and calls the handlers
// until ctx ends (returning nil) or the appmaster's job is gone
// (an error). Call it once, from one goroutine.
func (a *Appmaster) Run(ctx context.Context) error {
	retry := a.cfg.RetryMin
	for {
		from, err := a.refresh(ctx)
		if err == nil {
			retry = a.cfg.RetryMin
			err = a.watch(ctx, from)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case api.IsNotFound(err):
			return fmt.Errorf("appmaster: %s: %w", a.job, err)
		}
		if clock.Sleep(ctx, a.cfg.Clock, retry) != nil {
			return nil
		}
		retry = min(2*retry, a.cfg.RetryMax)
	}
}

// errChanged ends a watch so that Run lists the capboxes again.
var errChanged = errors.New("appmaster: capboxes changed")

// watch follows the watch stream from index from until a change of one of
// the appmaster's sets (or a create) asks for a refresh, then refreshes
// and follows again.
func (a *Appmaster) watch(ctx context.Context, from uint64) error {
	for {
		wctx, cancel := context.WithCancel(ctx)
		changed := make(chan struct{})
		go func() {
			select {
			case <-a.kick:
				cancel()
			case <-changed:
			case <-wctx.Done():
			}
		}()
		err := a.cfg.Client.Watch(wctx, from, func(ev api.WatchEvent) error {
			if ev.Job.Appmaster == a.job || ev.Job.ID == a.job {
				return errChanged
			}
			from = ev.Index
			return nil
		})
		close(changed)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, errChanged) && !errors.Is(err, context.Canceled) {
			return err
		}
		if from, err = a.refresh(ctx); err != nil {
			return err
		}
	}
}

// refresh lists the capboxes, tells the handlers what changed, and
// returns the index the list is current as of.
func (a *Appmaster) refresh(ctx context.Context) (uint64, error) {
	list, err := a.cfg.Client.Capboxes(ctx, a.job)
	if err != nil {
		return 0, err
	}
	// The calls, in order, made after the lock is let go.
	var calls []func()
	a.mu.Lock()
	for _, b := range list.Capboxes {
		h := a.mu.handlers[b.Set]
		if h == nil {
			continue
		}
		// A capbox's tasks before the capbox: they end first.
		th, _ := h.(TaskHandler)
		for _, t := range b.Tasks {
			calls = a.taskCallsLocked(calls, t, th)
		}
		prev, told := a.mu.seen[b.ID]
		switch {
		case told && prev.Done():
		case b.State == api.CapboxRunning && prev != api.CapboxRunning:
			calls = append(calls, func() { h.CapboxRunning(b) })
			a.mu.seen[b.ID] = b.State
		case b.State.Done():
			calls = append(calls, func() { h.CapboxCompleted(b) })
			a.mu.seen[b.ID] = b.State
		}
	}
	a.mu.Unlock()
	for _, call := range calls {
		call()
	}
	return list.Index, nil
}

// taskCallsLocked appends the calls t's handler is owed: its own, or
// recovered, the capbox handler's.
func (a *Appmaster) taskCallsLocked(calls []func(), t api.CapTaskStatus, recovered TaskHandler) []func() {
	h := a.mu.tasks[t.ID]
	if h == nil {
		h = recovered
	}
	prev, told := a.mu.taskSeen[t.ID]
	switch {
	case h == nil || told && prev.Done():
	case t.State == api.TaskRunning && prev != api.TaskRunning:
		calls = append(calls, func() { h.TaskRunning(t) })
		a.mu.taskSeen[t.ID] = t.State
	case t.State.Done():
		calls = append(calls, func() { h.TaskCompleted(t) })
		a.mu.taskSeen[t.ID] = t.State
	}
	return calls
}
