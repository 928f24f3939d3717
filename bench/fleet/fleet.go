package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/remote"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// Config says what fleet to run. Zero values mean the documented defaults.
type Config struct {
	// Addrs are the dispatcher replicas' base URLs. Required.
	Addrs []string
	// Token is the bearer token of the nodes' requests; "" sends none.
	Token string
	// Nodes is how many simulated nodes to run. Required (at least 1).
	Nodes int
	// NamePrefix and NameSuffix name the nodes: NamePrefix + "1" +
	// NameSuffix to NamePrefix + Nodes + NameSuffix. Default prefix
	// "fleet-", no suffix. Fleets that share a prefix and differ in
	// suffix interleave in name order, which is the order a bin-packing
	// dispatcher fills equal nodes in.
	NamePrefix, NameSuffix string
	// Pool is the nodes' pool. Default the default pool.
	Pool string
	// Labels are every node's labels.
	Labels map[string]string
	// CPU (millicores) and Memory (bytes) are each node's capacity, all
	// of it allocatable to both tiers. Defaults 64 cores and 256Gi.
	CPU, Memory int64
	// RegisterConcurrency bounds the registrations in flight during
	// Start. Default 64.
	RegisterConcurrency int
	// PollWait is the nodes' longest target long-poll. Default remote's
	// (30s).
	PollWait time.Duration
	// Timeout bounds each request of a node. Default api's.
	Timeout time.Duration
	// HeartbeatPeriod, when above 0, has every node send its usage this
	// often: what its simulated pods' specs say they use
	// (nodelet.Config.RuntimeUsage), as a real node sends what its
	// cgroups measure, for the dispatcher's usage estimates. Default 0:
	// no heartbeats.
	HeartbeatPeriod time.Duration
	// Logger receives the agents' logs. Default: discard.
	Logger *slog.Logger
	// PodLog, when set, receives a line per pod start and end (see the
	// PodLog constant), each in one Write. Default: none.
	PodLog io.Writer
}

// Defaults of Config.
const (
	DefaultNamePrefix          = "fleet-"
	DefaultCPU                 = 64_000
	DefaultMemory              = 256 << 30
	DefaultRegisterConcurrency = 64
)

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("fleet: config: "+format, args...)) }
	if len(c.Addrs) == 0 {
		add("Addrs: at least one dispatcher address is required")
	}
	if c.Nodes < 1 {
		add("Nodes %d: want at least 1", c.Nodes)
	}
	if strings.ContainsAny(c.NamePrefix, "/ \t\n") {
		add("NamePrefix %q must not contain '/' or spaces", c.NamePrefix)
	}
	if strings.ContainsAny(c.NameSuffix, "/ \t\n") {
		add("NameSuffix %q must not contain '/' or spaces", c.NameSuffix)
	}
	if c.CPU < 0 || c.Memory < 0 {
		add("CPU %d and Memory %d must not be negative", c.CPU, c.Memory)
	}
	if c.RegisterConcurrency < 0 {
		add("RegisterConcurrency %d must not be negative", c.RegisterConcurrency)
	}
	if c.PollWait < 0 || c.Timeout < 0 || c.HeartbeatPeriod < 0 {
		add("PollWait %v, Timeout %v and HeartbeatPeriod %v must not be negative", c.PollWait, c.Timeout, c.HeartbeatPeriod)
	}
	return errors.Join(errs...)
}

func (c *Config) setDefaults() {
	if c.NamePrefix == "" {
		c.NamePrefix = DefaultNamePrefix
	}
	if c.CPU == 0 {
		c.CPU = DefaultCPU
	}
	if c.Memory == 0 {
		c.Memory = DefaultMemory
	}
	if c.RegisterConcurrency == 0 {
		c.RegisterConcurrency = DefaultRegisterConcurrency
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Fleet is a set of simulated nodes running in this process. See the
// package comment.
type Fleet struct {
	cfg    Config
	nodes  []*node
	cancel context.CancelFunc
	wg     sync.WaitGroup // the agents' Run
	once   sync.Once
}

// node is one simulated node: its own api client (and so its own
// connections), sim host, runtime, remote dispatcher and agent.
type node struct {
	name   string
	client *api.Client
	host   *sim.Host
	rt     runtime.Runtime
	remote *remote.Dispatcher
	agent  *nodelet.Agent
	joined atomic.Bool // Join succeeded
}

// Start registers cfg.Nodes nodes with the dispatcher, at most
// RegisterConcurrency at a time, and runs their agents until Close. ctx
// bounds the registrations only; the agents run until Close. On error,
// what was started is stopped.
func Start(ctx context.Context, cfg Config) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if err := EnsureFiles(0, cfg.Nodes); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &Fleet{cfg: cfg, cancel: cancel, nodes: make([]*node, cfg.Nodes)}
	// Every node offers the nodelet's default port range, as a real
	// nodelet does: jobs with ports run in the simulation too.
	capacity := api.Capacity{CPU: cfg.CPU, Memory: cfg.Memory, Ports: api.DefaultPortRange.Size()}
	var podLog *podWriter
	if cfg.PodLog != nil {
		podLog = &podWriter{w: cfg.PodLog}
	}
	for i := range f.nodes {
		name := fmt.Sprintf("%s%d%s", cfg.NamePrefix, i+1, cfg.NameSuffix)
		c, err := api.NewClient(api.ClientConfig{Addrs: cfg.Addrs, Token: cfg.Token, Timeout: cfg.Timeout})
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("fleet: %w", err)
		}
		n := &node{name: name, client: c, host: sim.NewHost()}
		f.nodes[i] = n
		if podLog != nil {
			n.rt = &loggedRuntime{Runtime: sim.New(n.host), node: name, log: podLog}
		} else {
			n.rt = sim.New(n.host)
		}
		d, err := remote.New(remote.Config{Client: c, Logger: cfg.Logger, PollWait: cfg.PollWait, Node: api.NodeSpec{
			Name: name, Pool: cfg.Pool, Labels: cfg.Labels, Capacity: capacity,
			Allocatable: api.Allocatable{Online: capacity, Offline: capacity}, Ports: api.DefaultPortRange,
		}})
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("fleet: node %s: %w", name, err)
		}
		a, err := nodelet.New(nodelet.Config{Node: name, Runtime: n.rt, Dispatcher: d, Logger: cfg.Logger,
			RuntimeUsage: cfg.HeartbeatPeriod > 0, HeartbeatPeriod: cfg.HeartbeatPeriod})
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("fleet: node %s: %w", name, err)
		}
		n.remote, n.agent = d, a
	}
	if err := f.register(ctx, runCtx); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// register joins every node, RegisterConcurrency at a time, and starts
// each agent as soon as its node joined.
func (f *Fleet) register(ctx, runCtx context.Context) error {
	sem := make(chan struct{}, f.cfg.RegisterConcurrency)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, n := range f.nodes {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			// Join retries what may be transient, with backoff.
			if err := n.remote.Join(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("fleet: %w", err))
				mu.Unlock()
				cancel()
				return
			}
			n.joined.Store(true)
			f.wg.Go(func() { _ = n.agent.Run(runCtx) })
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fleet: register: %w", err)
	}
	return nil
}

// Close stops every agent, waits for them, then ends the simulated pods
// and closes the nodes' connections. It is safe to call more than once.
func (f *Fleet) Close() {
	f.once.Do(func() {
		f.cancel()
		var closers sync.WaitGroup
		for _, n := range f.nodes {
			if n != nil && n.agent != nil {
				closers.Go(func() { _ = n.agent.Close() })
			}
		}
		closers.Wait()
		f.wg.Wait()
		for _, n := range f.nodes {
			if n == nil {
				continue
			}
			_ = n.rt.Close()
			n.host.Close()
			n.client.Close()
		}
	})
}

// Names returns the nodes' names, in order.
func (f *Fleet) Names() []string {
	out := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n.name
	}
	return out
}

// Stats sums the fleet's nodes.
type Stats struct {
	// Nodes is the fleet's size; Registered the nodes whose agents run
	// (each registered once at least).
	Nodes, Registered int
	// Running is the pods running now.
	Running int
	// Starts, Exits, ReportsAcked and Heartbeats sum the agents'
	// counters; TargetErrors, ReportErrors and HeartbeatErrors their
	// failed calls.
	Starts, Exits, ReportsAcked, Heartbeats     uint64
	TargetErrors, ReportErrors, HeartbeatErrors uint64
	// PendingReports is the reports waiting to be acknowledged.
	PendingReports int
}

// Stats returns the fleet's counters now.
func (f *Fleet) Stats() Stats {
	s := Stats{Nodes: len(f.nodes)}
	for _, n := range f.nodes {
		if n == nil || n.agent == nil {
			continue
		}
		a := n.agent.Stats()
		if n.joined.Load() {
			s.Registered++
		}
		s.Running += a.Running
		s.Starts += a.Starts
		s.Exits += a.Exits
		s.ReportsAcked += a.ReportsAcked
		s.TargetErrors += a.TargetErrors
		s.ReportErrors += a.ReportErrors
		s.Heartbeats += a.Heartbeats
		s.HeartbeatErrors += a.HeartbeatErrors
		s.PendingReports += a.PendingReports
	}
	return s
}
