package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
)

// Client is what the Dispatcher needs of the dispatcher's HTTP API;
// *api.Client implements it. Every non-2xx reply is an *api.APIError.
type Client interface {
	// RegisterNode registers (or re-registers) the node.
	RegisterNode(ctx context.Context, spec api.NodeSpec) error
	// Target long-polls the node's target for at most wait: changed is
	// false when the wait ended with the target still at generation.
	Target(ctx context.Context, node string, generation uint64, wait time.Duration) (t api.NodeTarget, changed bool, err error)
	// TargetDiff is Target asking for the change since generation
	// (api.NodeTarget.Base set) when the dispatcher can give it.
	TargetDiff(ctx context.Context, node string, generation uint64, wait time.Duration) (t api.NodeTarget, changed bool, err error)
	// Report delivers task reports, oldest first.
	Report(ctx context.Context, node string, reports []api.TaskReport) error
	// Heartbeat delivers the node's usage.
	Heartbeat(ctx context.Context, node string, usage api.NodeUsage) error
}

var _ Client = (*api.Client)(nil)

// Config configures a Dispatcher. Zero values mean the documented defaults.
type Config struct {
	// Client talks to the dispatcher. Required.
	Client Client
	// Node is what Join registers; Node.Name is required and the spec
	// must pass api's validation.
	Node api.NodeSpec
	// PollWait is the longest wait of one target long-poll; the
	// Dispatcher polls again when it ends without a change. Default 30s.
	PollWait time.Duration
	// RetryMin and RetryMax bound the exponential backoff between failed
	// registrations. Defaults 100ms and 5s.
	RetryMin, RetryMax time.Duration
	// Clock times that backoff. Default the system clock.
	Clock clock.Clock
	// Logger receives registration failures and dropped reports.
	// Default: discarded.
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultPollWait = 30 * time.Second
	DefaultRetryMin = 100 * time.Millisecond
	DefaultRetryMax = 5 * time.Second
)

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("remote: config: Client is required"))
	}
	if err := c.Node.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("remote: config: Node: %w", err))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"PollWait", c.PollWait}, {"RetryMin", c.RetryMin}, {"RetryMax", c.RetryMax}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("remote: config: %s %v must not be negative", d.name, d.v))
		}
	}
	if c.RetryMin > 0 && c.RetryMax > 0 && c.RetryMin > c.RetryMax {
		errs = append(errs, fmt.Errorf("remote: config: RetryMin %v exceeds RetryMax %v", c.RetryMin, c.RetryMax))
	}
	return errors.Join(errs...)
}

func (c *Config) setDefaults() {
	if c.PollWait == 0 {
		c.PollWait = DefaultPollWait
	}
	if c.RetryMin == 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax == 0 {
		c.RetryMax = max(DefaultRetryMax, c.RetryMin)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Clock = clock.OrSystem(c.Clock)
}

// anyGeneration is the generation the first long-poll claims to have: no
// target has it, so the dispatcher answers at once with the current
// target, even an empty one at generation 0, and the agent learns which
// recovered pods are unwanted without waiting for the first placement.
const anyGeneration = ^uint64(0)

// Dispatcher is a nodelet.Dispatcher over the dispatcher's HTTP API. It
// registers the node (Join), and registers it again whenever the
// dispatcher answers that it does not know it. It also answers for the
// pods of the last two targets which container is their first, for the
// LogServer's default container (FirstContainer).
type Dispatcher struct {
	cfg Config
	// held is the whole target as of the dispatcher's generation heldGen
	// under registration heldJoins, which a difference applies to, each
	// pod already converted for the agent (by task ID); nil before the
	// first target. Only Target touches them (one call at a time), but
	// FirstContainer reads held and gone: Target changes those with mu
	// held. stale: a difference did not apply to held, so the next poll
	// asks for the whole target.
	held      map[string]nodelet.DesiredPod
	heldGen   uint64
	heldJoins uint64
	stale     bool
	// When the last hold applied a difference (diffed), changed are the
	// pods it added or changed and gone those it removed.
	diffed  bool
	changed []nodelet.DesiredPod
	gone    []gonePod
	// reports is Report's buffer, reused from call to call (one call at
	// a time; the client encodes it before returning).
	reports []api.TaskReport

	joinMu sync.Mutex // serializes registrations

	// mu guards the fields below.
	mu struct {
		sync.Mutex
		joins     uint64 // successful registrations so far
		delivered bool   // a target has been returned
		base      uint64 // added to the dispatcher's generations
		last      uint64 // the newest generation returned
		// before is the held target that the last whole target
		// replaced; nil after a difference, whose target before is
		// held and gone.
		before map[string]nodelet.DesiredPod
	}
}

// gonePod names a pod a difference removed, and its first container.
type gonePod struct{ id, taskID, container string }

// firstContainer is the name of p's first container, "" if it has none
// or p is the zero DesiredPod (of a task in neither target).
func firstContainer(p *nodelet.DesiredPod) string {
	if p.Pod == nil || len(p.Pod.Containers) == 0 {
		return ""
	}
	return p.Pod.Containers[0].Name
}

var (
	_ nodelet.Dispatcher    = (*Dispatcher)(nil)
	_ nodelet.UsageReporter = (*Dispatcher)(nil)
)

// New copies cfg, fills defaults and validates it.
func New(cfg Config) (*Dispatcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return &Dispatcher{cfg: cfg}, nil
}

// Node returns the spec the Dispatcher registers.
func (d *Dispatcher) Node() api.NodeSpec { return d.cfg.Node }

// Join registers the node, retrying with backoff until it succeeds or ctx
// is done; each failure is logged. An invalid spec (the dispatcher
// answers CodeInvalid) is not retried.
func (d *Dispatcher) Join(ctx context.Context) error {
	d.joinMu.Lock()
	defer d.joinMu.Unlock()
	return d.joinLocked(ctx)
}

func (d *Dispatcher) joinLocked(ctx context.Context) error {
	delay := time.Duration(0)
	for {
		err := d.cfg.Client.RegisterNode(ctx, d.cfg.Node)
		if err == nil {
			d.mu.Lock()
			if d.mu.joins > 0 {
				// The dispatcher may count this registration's
				// generations from 0: return only newer ones.
				d.mu.base = d.mu.last + 1
			}
			d.mu.joins++
			d.mu.Unlock()
			d.cfg.Logger.Info("remote: node registered", "node", d.cfg.Node.Name)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("remote: register node %s: %w", d.cfg.Node.Name, ctx.Err())
		}
		switch code(err) {
		case api.CodeInvalid:
			return fmt.Errorf("remote: register node %s: %w", d.cfg.Node.Name, err)
		case api.CodeUnauthorized, api.CodeForbidden:
			// Retrying changes nothing: the token is not this node's.
			return fmt.Errorf("remote: register node %s: the dispatcher refused this node's token (a nodelet token bound to %s is needed): %w",
				d.cfg.Node.Name, d.cfg.Node.Name, err)
		}
		delay = min(max(2*delay, d.cfg.RetryMin), d.cfg.RetryMax)
		d.cfg.Logger.Warn("remote: register node", "node", d.cfg.Node.Name, "retry_in", delay, "err", err)
		if err := clock.Sleep(ctx, d.cfg.Clock, delay); err != nil {
			return fmt.Errorf("remote: register node %s: %w", d.cfg.Node.Name, err)
		}
	}
}

// rejoin registers the node again unless someone did since joins was
// read.
func (d *Dispatcher) rejoin(ctx context.Context, joins uint64) error {
	d.joinMu.Lock()
	defer d.joinMu.Unlock()
	if d.joins() != joins {
		return nil
	}
	d.cfg.Logger.Warn("remote: the dispatcher does not know the node; registering again", "node", d.cfg.Node.Name)
	return d.joinLocked(ctx)
}

func (d *Dispatcher) joins() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.joins
}

// Target implements nodelet.Dispatcher: it long-polls, PollWait at a
// time, until the target's generation differs from knownGeneration or ctx
// is done. The first call of a Dispatcher with knownGeneration 0 returns
// the current target at once, whatever its generation. When the
// dispatcher does not know the node, Target registers it again (once per
// call; a second refusal is returned as an error, which the agent retries
// after a backoff) and keeps polling.
//
// The generations Target returns are the dispatcher's plus an offset that
// grows past every generation returned whenever the node registers again:
// a dispatcher that lost the node may count its generations from 0 again,
// and the agent must still see every target as new.
func (d *Dispatcher) Target(ctx context.Context, node string, knownGeneration uint64) (nodelet.Target, error) {
	rejoined := false
	for {
		joins := d.joins()
		ask := d.ask(knownGeneration)
		poll := d.cfg.Client.Target
		if d.held != nil && !d.stale && d.heldJoins == joins && d.heldGen == ask {
			// The whole target at ask is here: the change since will do.
			poll = d.cfg.Client.TargetDiff
		}
		t, changed, err := poll(ctx, node, ask, d.cfg.PollWait)
		switch {
		case ctx.Err() != nil:
			return nodelet.Target{}, fmt.Errorf("remote: target of %s: %w", node, ctx.Err())
		case err != nil && code(err) == api.CodeNotFound && !rejoined:
			if err := d.rejoin(ctx, joins); err != nil {
				return nodelet.Target{}, err
			}
			rejoined = true
		case err != nil:
			return nodelet.Target{}, fmt.Errorf("remote: target of %s: %w", node, err)
		case d.joins() != joins:
			// The node registered again during the poll: the answer
			// may be the old registration's. Ask again.
		case !changed || t.Generation == ask:
			// The wait ended without a change: poll again.
		case !d.hold(t, joins):
			// A change from a generation not held: ask for the whole.
			d.stale = true
		default:
			return d.convert(t.Generation, t.Base, knownGeneration), nil
		}
	}
}

// hold makes t, a whole target or a change since the held one, the held
// target, and reports whether it could.
func (d *Dispatcher) hold(t api.NodeTarget, joins uint64) bool {
	if t.Base != 0 && (d.held == nil || d.stale || t.Base != d.heldGen || d.heldJoins != joins) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.before = nil
	if t.Base == 0 {
		d.mu.before = d.held
		d.held, d.stale = make(map[string]nodelet.DesiredPod, len(t.Pods)), false
	}
	// changed and gone go to the agent with the target: new ones each time.
	d.diffed, d.changed, d.gone = t.Base != 0, nil, nil
	if len(t.Removed) > 0 {
		d.gone = make([]gonePod, 0, len(t.Removed))
	}
	for _, id := range t.Removed {
		if p, ok := d.held[id]; ok {
			d.gone = append(d.gone, gonePod{p.ID, p.TaskID, firstContainer(&p)})
			delete(d.held, id)
		}
	}
	if d.diffed {
		d.changed = make([]nodelet.DesiredPod, 0, len(t.Pods))
	}
	var (
		group *nodelet.Group // the last pod's, which the next of its group shares
		spec  *api.PodSpec   // likewise
	)
	for i := range t.Pods {
		p := desiredPod(&t.Pods[i], &group, &spec)
		d.held[p.TaskID] = p
		if d.diffed {
			d.changed = append(d.changed, p)
		}
	}
	d.heldGen, d.heldJoins = t.Generation, joins
	return true
}

// ask returns the dispatcher's generation to long-poll with for the
// agent's known generation.
func (d *Dispatcher) ask(known uint64) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.mu.delivered || known < d.mu.base {
		// Nothing returned yet, or only before the node registered
		// again: take whatever the dispatcher has.
		return anyGeneration
	}
	return known - d.mu.base
}

// inCapbox is the pod ID of the capbox a task runs in, "" for none.
func inCapbox(task string) string {
	if task == "" {
		return ""
	}
	return PodID(task)
}

// desiredPod converts a pod of a target into the agent's, once, when the
// pod enters the held target (its pod ID is a string built from the task
// ID: built for every target, it was a third of the conversion). The pod
// shares *group, the last pod's, when it is of the same group; else
// *group becomes its own. Likewise it shares *spec when its spec shares
// the last one's memory, as the pods of a group do in a decoded target;
// else *spec becomes a copy of its own, so that a pod held keeps no
// decoded target alive.
func desiredPod(p *api.TargetPod, group **nodelet.Group, spec **api.PodSpec) nodelet.DesiredPod {
	tier := cgroup.Offline
	if p.QoS == api.QoSOnline {
		tier = cgroup.Online
	}
	g := nodelet.Group{Job: p.Job, JobName: p.JobName, Name: p.Group, Count: p.Count, Token: p.Token, MaxRunTime: time.Duration(p.MaxRunTime)}
	if *group == nil || **group != g {
		own := g
		*group = &own
	}
	if *spec == nil || !sharedSpec(*spec, &p.Pod) {
		own := p.Pod
		*spec = &own
	}
	return nodelet.DesiredPod{
		ID:         PodID(p.TaskID),
		TaskID:     p.TaskID,
		Generation: attempt(p.TaskID),
		Tier:       tier,
		Priority:   p.Priority,
		Pod:        *spec,
		Group:      *group,
		Capbox:     p.Capbox,
		InCapbox:   inCapbox(p.InCapbox),
		Ports:      p.Ports,
	}
}

// sharedSpec reports whether a and b share their memory (and are
// therefore equal, decoded specs being read-only).
func sharedSpec(a, b *api.PodSpec) bool {
	return len(a.Containers) == len(b.Containers) && (len(a.Containers) == 0 || &a.Containers[0] == &b.Containers[0]) &&
		a.SharePID == b.SharePID && a.Sim == b.Sim && a.Network == b.Network &&
		len(a.Volumes) == len(b.Volumes) && (len(a.Volumes) == 0 || &a.Volumes[0] == &b.Volumes[0])
}

// convert turns the held target, at the dispatcher's generation, into the
// agent's. When the last hold applied a difference to the target the
// agent holds (known, the dispatcher's base before it), the agent gets
// that difference, else the whole target.
func (d *Dispatcher) convert(generation, base, known uint64) nodelet.Target {
	d.mu.Lock()
	gen := d.mu.base + generation
	d.mu.last = max(d.mu.last, gen)
	d.mu.delivered = true
	diff := d.diffed && known != 0 && known == d.mu.base+base
	d.mu.Unlock()
	if diff {
		out := nodelet.Target{Generation: gen, Base: known, Pods: d.changed, Removed: make([]string, 0, len(d.gone))}
		for _, p := range d.gone {
			out.Removed = append(out.Removed, p.id)
		}
		return out
	}
	out := nodelet.Target{Generation: gen, Pods: make([]nodelet.DesiredPod, 0, len(d.held))}
	for _, p := range d.held {
		out.Pods = append(out.Pods, p)
	}
	return out
}

// FirstContainer returns the name of the first container of the pod that
// runs taskID, if the task was in one of the last two targets, else "".
func (d *Dispatcher) FirstContainer(taskID string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.held[taskID]; ok {
		return firstContainer(&p)
	}
	for _, g := range d.gone {
		if g.taskID == taskID {
			return g.container
		}
	}
	p := d.mu.before[taskID]
	return firstContainer(&p)
}

// Report implements nodelet.Dispatcher. Reports the dispatcher would
// refuse as invalid are logged and dropped rather than sent, since the
// agent would resend them forever; an over-long message is cut to
// api.MaxStringLen and an exit code outside 0 to 255 clamped first. When
// the dispatcher does not know the node, Report registers it again and
// sends once more; a second refusal is returned.
func (d *Dispatcher) Report(ctx context.Context, node string, reports []nodelet.PodReport) error {
	out := d.reports[:0]
	for i := range reports {
		r := reports[i].TaskReport
		if r.TaskID == "" {
			r.TaskID = reports[i].PodID
		}
		r.Message = truncate(r.Message, api.MaxStringLen)
		r.ExitCode = min(max(r.ExitCode, 0), 255)
		if err := r.Validate(); err != nil {
			d.cfg.Logger.Error("remote: dropping an invalid task report", "node", node, "task", r.TaskID, "err", err)
			continue
		}
		out = append(out, r)
	}
	d.reports = out
	if len(out) == 0 {
		return nil
	}
	for rejoined := false; ; rejoined = true {
		joins := d.joins()
		err := d.cfg.Client.Report(ctx, node, out)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || code(err) != api.CodeNotFound || rejoined {
			return fmt.Errorf("remote: report %d task states of %s: %w", len(out), node, err)
		}
		if err := d.rejoin(ctx, joins); err != nil {
			return err
		}
	}
}

// Heartbeat implements nodelet.UsageReporter: it sends the node's usage.
// Usage the dispatcher would refuse as invalid (a negative value) is not
// sent: Heartbeat returns the validation error. When the dispatcher does
// not know the node, Heartbeat registers it again and sends once more; a
// second refusal is returned.
func (d *Dispatcher) Heartbeat(ctx context.Context, node string, usage api.NodeUsage) error {
	if err := usage.Validate(); err != nil {
		return fmt.Errorf("remote: heartbeat of %s: usage: %w", node, err)
	}
	for rejoined := false; ; rejoined = true {
		joins := d.joins()
		err := d.cfg.Client.Heartbeat(ctx, node, usage)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || code(err) != api.CodeNotFound || rejoined {
			return fmt.Errorf("remote: heartbeat of %s: %w", node, err)
		}
		if err := d.rejoin(ctx, joins); err != nil {
			return err
		}
	}
}

// code returns the api error code of err, or "".
func code(err error) string {
	var ae *api.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
