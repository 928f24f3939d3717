package metrics

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
)

// Config configures Metrics.
type Config struct {
	// Process adds the Go runtime's and the process's collectors (go_*,
	// process_*). Default false: tests that run many nodelets in one
	// process leave them out.
	Process bool
}

// Metrics holds one nodelet's metrics. It is the agent's
// nodelet.Observer; its methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	startOnline, startOffline prometheus.Observer
	poll, pollErr             prometheus.Observer
	report, reportErr         prometheus.Observer

	attachOnce sync.Once
}

var _ nodelet.Observer = (*Metrics)(nil)

// New returns a nodelet's metrics, registered in a registry of their own.
func New(cfg Config) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	start := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_nodelet_pod_start_duration_seconds",
		Help: "Time from the nodelet deciding to start a pod to the runtime having started it (waiting for a start slot included), by tier.",
		// 1ms to about 65s.
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 17),
	}, []string{"tier"})
	poll := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_nodelet_target_poll_duration_seconds",
		Help: "Target long-polls to the dispatcher, their wait included, by result (ok or error).",
		// 1ms to about 131s: a poll waits up to its wait for a change.
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
	}, []string{"result"})
	report := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_nodelet_report_duration_seconds",
		Help: "Reports of task states to the dispatcher, until committed, by result (ok or error).",
		// 100µs to about 6.5s.
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17),
	}, []string{"result"})
	m.startOnline, m.startOffline = start.WithLabelValues(string(cgroup.Online)), start.WithLabelValues(string(cgroup.Offline))
	m.poll, m.pollErr = poll.WithLabelValues("ok"), poll.WithLabelValues("error")
	m.report, m.reportErr = report.WithLabelValues("ok"), report.WithLabelValues("error")
	m.reg.MustRegister(start, poll, report)
	if cfg.Process {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// PodStarted implements nodelet.Observer.
func (m *Metrics) PodStarted(tier cgroup.Tier, d time.Duration) {
	if tier == cgroup.Online {
		m.startOnline.Observe(d.Seconds())
		return
	}
	m.startOffline.Observe(d.Seconds())
}

// TargetPolled implements nodelet.Observer.
func (m *Metrics) TargetPolled(d time.Duration, err error) {
	if err != nil {
		m.pollErr.Observe(d.Seconds())
		return
	}
	m.poll.Observe(d.Seconds())
}

// Reported implements nodelet.Observer.
func (m *Metrics) Reported(d time.Duration, err error) {
	if err != nil {
		m.reportErr.Observe(d.Seconds())
		return
	}
	m.report.Observe(d.Seconds())
}

// Attach registers the collector of a's state, read at each scrape. It may
// be called once; later calls do nothing.
func (m *Metrics) Attach(a *nodelet.Agent) {
	m.attachOnce.Do(func() { m.reg.MustRegister(&agentCollector{a: a}) })
}

// Write writes every metric in Prometheus' text format to
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

// The descriptions of what agentCollector reads at each scrape.
var (
	descPods = prometheus.NewDesc("sluice_nodelet_pods",
		"Pods by state (starting: waiting for or in a runtime start; running: running or being stopped) and tier.",
		[]string{"state", "tier"}, nil)
	descPending    = prometheus.NewDesc("sluice_nodelet_reports_pending", "Task reports waiting for the dispatcher's acknowledgement.", nil, nil)
	descGeneration = prometheus.NewDesc("sluice_nodelet_target_generation", "The newest target generation the nodelet applied.", nil, nil)
	descStarts     = prometheus.NewDesc("sluice_nodelet_pod_starts_total", "Pods the runtime started.", nil, nil)
	descStartFails = prometheus.NewDesc("sluice_nodelet_pod_start_failures_total",
		"Pods that failed to start, by reason: image_denied, volume_denied, network_denied (refused by the node), or runtime.",
		[]string{"reason"}, nil)
	descOpErrors = prometheus.NewDesc("sluice_nodelet_runtime_op_errors_total", "Runtime stop and remove calls that failed (they are retried).", nil, nil)
	descExits    = prometheus.NewDesc("sluice_nodelet_pod_exits_total", "Pods that ended, however.", nil, nil)
	descKills    = prometheus.NewDesc("sluice_nodelet_pod_kills_total",
		"Pods ended by force, by reason: unwanted (no longer in the target), time_limit (past their max run time), memory_killer (the overcommit loop's, under memory pressure), kernel_oom (at their memory limit).",
		[]string{"reason"}, nil)
	descAdopted   = prometheus.NewDesc("sluice_nodelet_pods_adopted_total", "Running pods taken over from an earlier nodelet.", nil, nil)
	descRemoved   = prometheus.NewDesc("sluice_nodelet_pods_removed_total", "Ended pods removed from the runtime once reported.", nil, nil)
	descReports   = prometheus.NewDesc("sluice_nodelet_reports_total", "Task reports the dispatcher acknowledged.", nil, nil)
	descReportErr = prometheus.NewDesc("sluice_nodelet_report_errors_total", "Report calls that failed (retried).", nil, nil)
	descTargetErr = prometheus.NewDesc("sluice_nodelet_target_errors_total", "Target calls that failed or returned an unusable target.", nil, nil)
	descBeats     = prometheus.NewDesc("sluice_nodelet_heartbeats_total", "Usage heartbeats the dispatcher acknowledged.", nil, nil)
	descBeatErr   = prometheus.NewDesc("sluice_nodelet_heartbeat_errors_total", "Heartbeat calls that failed.", nil, nil)

	descTierCPU = prometheus.NewDesc("sluice_nodelet_tier_cpu_usage_cores",
		"CPU the tier used over the overcommit loop's last period, in cores.", []string{"tier"}, nil)
	descTierMem = prometheus.NewDesc("sluice_nodelet_tier_memory_usage_bytes",
		"The tier's memory working set at the overcommit loop's last sample.", []string{"tier"}, nil)
	descQuota = prometheus.NewDesc("sluice_nodelet_offline_cpu_quota_cores",
		"The offline tier's CPU quota the overcommit controller set, in cores (the online tier has no limit).", nil, nil)
	descQuotaMin = prometheus.NewDesc("sluice_nodelet_offline_cpu_quota_min_cores", "The floor of the offline tier's CPU quota, in cores.", nil, nil)
	descQuotaMax = prometheus.NewDesc("sluice_nodelet_offline_cpu_quota_max_cores", "The ceiling of the offline tier's CPU quota, in cores.", nil, nil)
	descUtil     = prometheus.NewDesc("sluice_nodelet_host_cpu_utilization_ratio", "The host's CPU utilization the controller saw, 0 to 1.", nil, nil)
	descMemLimit = prometheus.NewDesc("sluice_nodelet_offline_memory_limit_bytes",
		"The offline tier's memory limit the overcommit controller set (the online tier has no limit).", nil, nil)
	descMemGuaranteed = prometheus.NewDesc("sluice_nodelet_offline_memory_guaranteed_bytes", "The memory the offline tier is guaranteed.", nil, nil)
	descMemAvailable  = prometheus.NewDesc("sluice_nodelet_host_memory_available_bytes", "The host's available memory (MemAvailable).", nil, nil)
	descTicks         = prometheus.NewDesc("sluice_nodelet_overcommit_ticks_total", "Periods the overcommit loop ran.", nil, nil)
	descTickErrors    = prometheus.NewDesc("sluice_nodelet_overcommit_errors_total",
		"Failed samples, limit writes, kills and resource file writes of the overcommit loop.", nil, nil)
)

// agentCollector reads an agent's state at each scrape.
type agentCollector struct{ a *nodelet.Agent }

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPods, descPending, descGeneration, descStarts, descStartFails, descOpErrors,
		descExits, descKills, descAdopted, descRemoved, descReports, descReportErr, descTargetErr, descBeats, descBeatErr,
		descTierCPU, descTierMem, descQuota, descQuotaMin, descQuotaMax, descUtil, descMemLimit, descMemGuaranteed,
		descMemAvailable, descTicks, descTickErrors} {
		ch <- d
	}
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	on, off := string(cgroup.Online), string(cgroup.Offline)

	s := c.a.Stats()
	gauge(descPods, float64(s.StartingOnline), "starting", on)
	gauge(descPods, float64(s.Starting-s.StartingOnline), "starting", off)
	gauge(descPods, float64(s.RunningOnline), "running", on)
	gauge(descPods, float64(s.Running-s.RunningOnline), "running", off)
	gauge(descPending, float64(s.PendingReports))
	gauge(descGeneration, float64(s.Generation))
	counter(descStarts, s.Starts)
	denied := s.ImageDenied + s.VolumeDenied + s.NetworkDenied
	counter(descStartFails, s.ImageDenied, "image_denied")
	counter(descStartFails, s.VolumeDenied, "volume_denied")
	counter(descStartFails, s.NetworkDenied, "network_denied")
	counter(descStartFails, s.StartFailures-min(denied, s.StartFailures), "runtime")
	counter(descOpErrors, s.OpErrors)
	counter(descExits, s.Exits)
	counter(descKills, s.Stops-min(s.TimeLimits, s.Stops), "unwanted")
	counter(descKills, s.TimeLimits, "time_limit")
	counter(descKills, s.Kills, "memory_killer")
	counter(descKills, s.OOMKilled, "kernel_oom")
	counter(descAdopted, s.Adopted)
	counter(descRemoved, s.Removed)
	counter(descReports, s.ReportsAcked)
	counter(descReportErr, s.ReportErrors)
	counter(descTargetErr, s.TargetErrors)
	counter(descBeats, s.Heartbeats)
	counter(descBeatErr, s.HeartbeatErrors)

	loop := c.a.Overcommit()
	if loop == nil {
		return
	}
	ls := loop.Stats()
	counter(descTicks, ls.Ticks)
	counter(descTickErrors, ls.Errors)
	r, d, ok := loop.LastStep()
	if !ok {
		return
	}
	gauge(descTierCPU, float64(r.Online.LastCPUMillis)/1000, on)
	gauge(descTierCPU, float64(r.Offline.LastCPUMillis)/1000, off)
	gauge(descTierMem, float64(r.Online.LastMemoryBytes), on)
	gauge(descTierMem, float64(r.Offline.LastMemoryBytes), off)
	cpu, mem := d.CPU, d.Memory
	gauge(descQuota, float64(cpu.OfflineQuotaMillis)/1000)
	gauge(descQuotaMin, float64(cpu.MinMillis)/1000)
	gauge(descQuotaMax, float64(cpu.MaxMillis)/1000)
	gauge(descUtil, cpu.Util)
	gauge(descMemLimit, float64(mem.OfflineLimitBytes))
	gauge(descMemGuaranteed, float64(mem.GuaranteedBytes))
	gauge(descMemAvailable, float64(mem.AvailableBytes))
}
