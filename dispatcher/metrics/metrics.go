package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/raftkv"
)

// ErrConfig is wrapped by New's errors about its configuration.
var ErrConfig = errors.New("metrics: invalid config")

// ContentType is the media type Write writes: Prometheus' text format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Buckets of the histograms, in seconds.
var (
	// roundBuckets cover rounds and their solves, from 100µs to about 3s.
	roundBuckets = prometheus.ExponentialBuckets(0.0001, 2, 16)
	// requestBuckets cover API requests, from 100µs to about 6.5s; a
	// target long-poll that waits its whole wait lands in +Inf.
	requestBuckets = prometheus.ExponentialBuckets(0.0001, 2, 17)
)

// Config configures Metrics.
type Config struct {
	// Routes names the HTTP API's routes, the values of the route label
	// of the request metrics; Request takes a route by its index here.
	// Required.
	Routes []string
	// Process adds the Go runtime's and the process's collectors
	// (go_*, process_*). Default false: tests that run many replicas in
	// one process leave them out.
	Process bool
}

// Metrics holds one dispatcher replica's metrics: request counters and
// latencies, observed as requests are served; round histograms, observed
// as rounds end (ObserveRound, dispatcher.Config.OnRound); and, read at
// scrape time, the replica's raft, store, FSM and node state (Attach).
// Its methods are safe for concurrent use.
type Metrics struct {
	reg    *prometheus.Registry
	routes []string

	requests *prometheus.CounterVec
	// routes' counters, by route index: the request counter of each
	// status code is looked up in requests once, then kept.
	byRoute []routeMetrics

	roundSeconds, solveSeconds, buildSeconds, commitSeconds prometheus.Histogram
	flowNodes, flowArcs, unplaced                           prometheus.Gauge

	attachOnce sync.Once
}

// New returns the metrics of one replica, registered in a registry of
// their own.
func New(cfg Config) (*Metrics, error) {
	if len(cfg.Routes) == 0 {
		return nil, fmt.Errorf("%w: Routes is required", ErrConfig)
	}
	m := &Metrics{reg: prometheus.NewRegistry(), routes: cfg.Routes}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_http_requests_total",
		Help: "HTTP API requests served, by route and status code.",
	}, []string{"route", "code"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_http_request_duration_seconds",
		Help:    "Time from reading an HTTP API request's header to its reply (a streamed reply's start), by route.",
		Buckets: requestBuckets,
	}, []string{"route"})
	bytesIn := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_http_request_body_bytes_total",
		Help: "Bytes of HTTP API request bodies as they came on the wire (declared Content-Length), by route.",
	}, []string{"route"})
	m.byRoute = make([]routeMetrics, len(cfg.Routes))
	for i, r := range cfg.Routes {
		m.byRoute[i].latency, m.byRoute[i].bytesIn = latency.WithLabelValues(r), bytesIn.WithLabelValues(r)
	}
	m.roundSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sluice_round_duration_seconds", Help: "Scheduling rounds with pending work: the whole round, from reading its input to its commit.",
		Buckets: roundBuckets,
	})
	m.solveSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sluice_round_solve_seconds", Help: "Time a round's flow solver took.", Buckets: roundBuckets,
	})
	m.buildSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sluice_round_build_seconds", Help: "Time a round took to build its flow network.", Buckets: roundBuckets,
	})
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sluice_round_commit_seconds", Help: "Time a round's plan took to commit through raft.", Buckets: roundBuckets,
	})
	m.flowNodes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_round_flow_nodes", Help: "Nodes of the last round's flow network.",
	})
	m.flowArcs = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_round_flow_arcs", Help: "Arcs of the last round's flow network.",
	})
	m.unplaced = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_round_unscheduled_tasks", Help: "Tasks the last round left pending (placement found no room, or they wait their turn).",
	})
	m.reg.MustRegister(m.requests, latency, bytesIn, m.roundSeconds, m.solveSeconds, m.buildSeconds,
		m.commitSeconds, m.flowNodes, m.flowArcs, m.unplaced)
	if cfg.Process {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m, nil
}

// ObserveRound records a round's stat (dispatcher.Config.OnRound).
func (m *Metrics) ObserveRound(st dispatcher.RoundStat) {
	m.roundSeconds.Observe(st.Latency.Seconds())
	m.buildSeconds.Observe(st.Build.Seconds())
	m.solveSeconds.Observe(st.Solve.Seconds())
	if st.Commit > 0 {
		m.commitSeconds.Observe(st.Commit.Seconds())
	}
	m.flowNodes.Set(float64(st.FlowNodes))
	m.flowArcs.Set(float64(st.FlowArcs))
	m.unplaced.Set(float64(st.Unplaced))
}

// routeMetrics are one route's request metrics.
type routeMetrics struct {
	latency prometheus.Observer
	bytesIn prometheus.Counter
	// codes holds the request counter of each status code, by code
	// (numCodes for any other), once a request had it.
	codes [numCodes + 1]atomic.Pointer[counter]
}

// counter boxes a prometheus.Counter for an atomic.Pointer.
type counter struct{ prometheus.Counter }

// numCodes bounds the status codes counted by their number: HTTP's are
// 100 to 599; anything else is counted as "other".
const numCodes = 600

// Request records one request to the route of index route in
// Config.Routes, answered with status code after d, whose body took
// bodyBytes on the wire (0 for none or unknown). An index out of range
// is counted under the last route. It costs some atomic additions and no
// allocation once the route has seen its status code.
func (m *Metrics) Request(route, code int, d time.Duration, bodyBytes int64) {
	if route < 0 || route >= len(m.routes) {
		route = len(m.routes) - 1
	}
	r := &m.byRoute[route]
	if code < 0 || code >= numCodes {
		code = numCodes
	}
	c := r.codes[code].Load()
	if c == nil {
		label := "other"
		if code < numCodes {
			label = strconv.Itoa(code)
		}
		r.codes[code].CompareAndSwap(nil, &counter{m.requests.WithLabelValues(m.routes[route], label)})
		c = r.codes[code].Load()
	}
	c.Inc()
	r.latency.Observe(d.Seconds())
	if bodyBytes > 0 {
		r.bytesIn.Add(float64(bodyBytes))
	}
}

// Attach registers the collector of a replica's state, read at each
// scrape: its raft replica and store, its FSM's jobs, tasks and nodes,
// and its dispatcher's round totals. It may be called once; later calls
// do nothing.
func (m *Metrics) Attach(d *dispatcher.Dispatcher, f *fsm.FSM, r *raftkv.Node) {
	m.attachOnce.Do(func() { m.reg.MustRegister(&stateCollector{d: d, f: f, r: r}) })
}

// Write writes every metric in Prometheus' text format (ContentType) to
// buf. A metric that fails to gather is left out and its error returned
// after the others are written.
func (m *Metrics) Write(buf *bytes.Buffer) error {
	mfs, gerr := m.reg.Gather()
	enc := expfmt.NewEncoder(buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return fmt.Errorf("metrics: encode %s: %w", mf.GetName(), err)
		}
	}
	if gerr != nil {
		return fmt.Errorf("metrics: gather: %w", gerr)
	}
	return nil
}

// The descriptions of what stateCollector reads at each scrape.
var (
	descRounds = prometheus.NewDesc("sluice_rounds_total",
		"Scheduling rounds with pending work this replica ran as leader.", nil, nil)
	descPlaced = prometheus.NewDesc("sluice_round_tasks_placed_total",
		"Tasks this replica's rounds placed (committed).", nil, nil)
	descRejected = prometheus.NewDesc("sluice_round_tasks_rejected_total",
		"Placements of this replica's rounds the FSM refused as stale (the tasks stay pending).", nil, nil)
	descPreempted = prometheus.NewDesc("sluice_round_tasks_preempted_total",
		"Running tasks this replica's rounds preempted.", nil, nil)
	descTasks = prometheus.NewDesc("sluice_tasks",
		"Tasks by queue, QoS class and state: pending (waiting for placement) or active (assigned, starting or running).",
		[]string{"queue", "qos", "state"}, nil)
	descJobs           = prometheus.NewDesc("sluice_jobs", "Jobs the replica holds, by state.", []string{"state"}, nil)
	descNodes          = prometheus.NewDesc("sluice_nodes", "Registered nodes by state.", []string{"state"}, nil)
	descDroppedReports = prometheus.NewDesc("sluice_task_reports_dropped_total",
		"Task reports the FSM refused (unknown tasks, illegal transitions); acknowledged to their nodes and logged.", nil, nil)
	descEstimateNodes = prometheus.NewDesc("sluice_usage_estimate_nodes",
		"Nodes whose recent heartbeats the leader's usage estimates cover (only the leader exports the estimates).", nil, nil)
	descOnlineCPU = prometheus.NewDesc("sluice_online_cpu_cores",
		"Over the nodes the estimates cover, the online tiers' CPU: used (as heartbeats said), estimated (for their online tasks, before headroom) and requested (by those tasks).",
		[]string{"source"}, nil)
	descOnlineMem = prometheus.NewDesc("sluice_online_memory_bytes",
		"Over the nodes the estimates cover, the online tiers' memory: used, estimated and requested, as sluice_online_cpu_cores.",
		[]string{"source"}, nil)

	descTerm     = prometheus.NewDesc("sluice_raft_term", "The replica's raft term.", nil, nil)
	descLeader   = prometheus.NewDesc("sluice_raft_is_leader", "1 when the replica leads, else 0.", nil, nil)
	descCommit   = prometheus.NewDesc("sluice_raft_commit_index", "The replica's raft commit index.", nil, nil)
	descApplied  = prometheus.NewDesc("sluice_raft_applied_index", "The last raft index the replica applied.", nil, nil)
	descMembers  = prometheus.NewDesc("sluice_raft_members", "Members of the raft group, as this replica knows it.", nil, nil)
	descStopped  = prometheus.NewDesc("sluice_raft_stopped", "1 when the replica stopped on an error (its store failed), else 0.", nil, nil)
	descProposed = prometheus.NewDesc("sluice_raft_proposals_total", "Commands this replica proposed.", nil, nil)
	descDropped  = prometheus.NewDesc("sluice_raft_proposals_dropped_total", "Proposals raft dropped (not applied).", nil, nil)
	descApplies  = prometheus.NewDesc("sluice_raft_applied_commands_total", "Commands the replica applied.", nil, nil)
	descSyncs    = prometheus.NewDesc("sluice_raft_log_sync_duration_seconds", "Syncs of the replica's raft log.", nil, nil)
	descSnaps    = prometheus.NewDesc("sluice_raft_snapshots_total",
		"Raft snapshots, by what the replica did: built (to truncate its log or for a peer) or restored.", []string{"op"}, nil)

	descDisk     = prometheus.NewDesc("sluice_store_disk_bytes", "Disk space the replica's pebble store takes.", nil, nil)
	descWAL      = prometheus.NewDesc("sluice_store_wal_bytes_total", "Bytes written to the store's write-ahead log.", nil, nil)
	descWriteAmp = prometheus.NewDesc("sluice_store_write_amplification",
		"The store's write amplification since the replica opened: bytes flushed and compacted over bytes flushed.", nil, nil)
	descReadAmp     = prometheus.NewDesc("sluice_store_read_amplification", "Sublevels and levels a read of the store may visit.", nil, nil)
	descCompactions = prometheus.NewDesc("sluice_store_compactions_total", "Compactions the store ran.", nil, nil)
	descFlushes     = prometheus.NewDesc("sluice_store_flushes_total", "Memtable flushes the store ran.", nil, nil)
)

// stateCollector reads a replica's state at each scrape.
type stateCollector struct {
	d *dispatcher.Dispatcher
	f *fsm.FSM
	r *raftkv.Node
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRounds, descPlaced, descRejected, descPreempted, descTasks, descJobs, descNodes,
		descDroppedReports, descEstimateNodes, descOnlineCPU, descOnlineMem,
		descTerm, descLeader, descCommit, descApplied, descMembers, descStopped, descProposed, descDropped, descApplies, descSyncs, descSnaps,
		descDisk, descWAL, descWriteAmp, descReadAmp, descCompactions, descFlushes} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
	}
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}

	t := c.d.Totals()
	counter(descRounds, float64(t.Rounds))
	counter(descPlaced, float64(t.Placed))
	counter(descRejected, float64(t.Rejected))
	counter(descPreempted, float64(t.Preempted))

	cs := c.f.Census()
	for s, n := range cs.Jobs {
		gauge(descJobs, float64(n), fsm.JobState(s).String())
	}
	for _, q := range cs.Queues {
		gauge(descTasks, float64(q.Pending), q.Queue, string(q.QoS), "pending")
		gauge(descTasks, float64(q.Active), q.Queue, string(q.QoS), "active")
	}
	nodes := map[api.NodeState]int{api.NodeReady: 0, api.NodeDraining: 0, api.NodeDown: 0}
	for _, n := range c.f.AppendNodeStates(nil) {
		nodes[n.State]++
	}
	for s, n := range nodes {
		gauge(descNodes, float64(n), string(s))
	}
	counter(descDroppedReports, float64(c.d.DroppedReports()))
	if et, ok := c.d.EstimateTotals(); ok {
		gauge(descEstimateNodes, float64(et.Nodes))
		gauge(descOnlineCPU, float64(et.OnlineUsage.CPU)/1000, "used")
		gauge(descOnlineCPU, float64(et.OnlineEstimate.CPU)/1000, "estimated")
		gauge(descOnlineCPU, float64(et.OnlineAsked.CPU)/1000, "requested")
		gauge(descOnlineMem, float64(et.OnlineUsage.Memory), "used")
		gauge(descOnlineMem, float64(et.OnlineEstimate.Memory), "estimated")
		gauge(descOnlineMem, float64(et.OnlineAsked.Memory), "requested")
	}

	st := c.r.Status()
	gauge(descTerm, float64(st.Term))
	gauge(descLeader, b2f(st.IsLeader))
	gauge(descCommit, float64(st.Commit))
	gauge(descApplied, float64(st.Applied))
	gauge(descMembers, float64(len(st.Members)))
	gauge(descStopped, b2f(st.Err != nil))
	rm := c.r.Metrics()
	counter(descProposed, float64(rm.Proposals))
	counter(descDropped, float64(rm.DroppedProposals))
	counter(descApplies, float64(rm.AppliedCommands))
	counter(descSnaps, float64(rm.SnapshotsBuilt), "built")
	counter(descSnaps, float64(rm.SnapshotsRestored), "restored")
	h := c.r.SyncLatency()
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets[b.Seconds()] = cum
	}
	ch <- prometheus.MustNewConstHistogram(descSyncs, h.Count, h.Sum.Seconds(), buckets)

	ss := c.r.StoreStats()
	gauge(descDisk, float64(ss.DiskBytes))
	counter(descWAL, float64(ss.WALBytesIn))
	gauge(descWriteAmp, ss.WriteAmp)
	gauge(descReadAmp, float64(ss.ReadAmp))
	counter(descCompactions, float64(ss.Compactions))
	counter(descFlushes, float64(ss.Flushes))
}
