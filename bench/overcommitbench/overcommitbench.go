package overcommitbench

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Sentinel errors callers act on (a test skips on them).
var (
	// ErrNotRoot: containers need namespaces and cgroups.
	ErrNotRoot = errors.New("overcommitbench: must run as root (containers need namespaces and cgroups)")
	// ErrNoCNI: the pod network needs the CNI plugins.
	ErrNoCNI = errors.New("overcommitbench: the CNI plugins (bridge, host-local, portmap) are not installed; scripts/install-cni.sh installs them")
	// ErrNoImage: no image was given and none can be built here.
	ErrNoImage = errors.New("overcommitbench: no workload image: give one (Config.Image), or run inside Sluice's source tree with the go command")
)

// Config says what Run builds and measures. Zero values mean the
// documented defaults; Validate reports every problem at once.
type Config struct {
	// NodeCPU is the node's CPU capacity in millicores. Default: the
	// host's CPUs.
	NodeCPU int64
	// NodeMemory is the node's memory capacity in bytes. Default 4 GiB,
	// or the host's memory when it has less.
	NodeMemory int64

	// OnlinePods is the number of online pods that burn a duty cycle of
	// what they ask for. Default 2.
	OnlinePods int
	// OnlineCPU and OnlineMemory are what each online pod asks for.
	// Defaults: 35% of NodeCPU and 15% of NodeMemory, so that with the
	// probe server online work asks for 80% of the CPU.
	OnlineCPU, OnlineMemory int64
	// OnlineDuty is the share of each period an online pod computes.
	// Default 0.1.
	OnlineDuty float64
	// OnlinePeriod is its cycle. Default 100ms.
	OnlinePeriod time.Duration
	// OnlineTouch is the memory each online pod keeps resident. Default
	// 32 MiB.
	OnlineTouch int64

	// ProbeCPU and ProbeMemory are what the probe server asks for.
	// Defaults: 10% of NodeCPU and 64 MiB.
	ProbeCPU, ProbeMemory int64
	// ProbeRate is the probe's requests per second, one at a time.
	// Default 50.
	ProbeRate float64

	// OfflineCPU and OfflineMemory are what each offline pod asks for.
	// Defaults 250 millicores and 256 MiB.
	OfflineCPU, OfflineMemory int64
	// OfflineTouch is the memory each offline pod keeps resident; it
	// burns a whole CPU when it can. Default 192 MiB.
	OfflineTouch int64
	// OfflineStep is the offline pods of each job submitted during the
	// fill. Default 2.
	OfflineStep int
	// MaxOffline bounds the offline pods submitted. Default 64.
	MaxOffline int
	// RefuseWait is how long a submitted offline job's pending tasks wait
	// for placement before the fill counts them refused. Default 3s.
	RefuseWait time.Duration

	// Warmup is the time after the online pods run before the unloaded
	// probe, for the usage of the online pods to reach the dispatcher.
	// Default 3s.
	Warmup time.Duration
	// Unloaded and Loaded are the probe phases' lengths. Defaults 10s and
	// 20s.
	Unloaded, Loaded time.Duration
	// SampleEvery is the time series' step. Default 1s.
	SampleEvery time.Duration
	// Timeout bounds the whole run. Default 5 minutes.
	Timeout time.Duration

	// Image is the directory of the workload image: a root filesystem
	// holding the workload program as /workload. Default: built into
	// WorkDir from this module's examples/workload with the go command,
	// found from the working directory upwards.
	Image string
	// WorkDir holds the dispatcher's data, the pods' state and the
	// built image. Default: a temporary directory, removed afterwards.
	WorkDir string
	// Shim is the sluice-shim binary the container runtime creates
	// containers through. Default as container.Config.Shim: sluice-shim
	// beside this process's binary if it is there, else none.
	Shim string
	// Logger receives progress. Default: discarded.
	Logger *slog.Logger
}

// Validate reports every problem of c.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("overcommitbench: "+format, args...))
	}
	for _, v := range []struct {
		name string
		v    int64
	}{
		{"NodeCPU", c.NodeCPU}, {"NodeMemory", c.NodeMemory}, {"OnlineCPU", c.OnlineCPU}, {"OnlineMemory", c.OnlineMemory},
		{"OnlineTouch", c.OnlineTouch}, {"ProbeCPU", c.ProbeCPU}, {"ProbeMemory", c.ProbeMemory},
		{"OfflineCPU", c.OfflineCPU}, {"OfflineMemory", c.OfflineMemory}, {"OfflineTouch", c.OfflineTouch},
		{"OnlinePods", int64(c.OnlinePods)}, {"OfflineStep", int64(c.OfflineStep)}, {"MaxOffline", int64(c.MaxOffline)},
	} {
		if v.v < 0 {
			bad("%s %d must not be negative", v.name, v.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"OnlinePeriod", c.OnlinePeriod}, {"RefuseWait", c.RefuseWait}, {"Warmup", c.Warmup}, {"Unloaded", c.Unloaded},
		{"Loaded", c.Loaded}, {"SampleEvery", c.SampleEvery}, {"Timeout", c.Timeout},
	} {
		if d.v < 0 {
			bad("%s %v must not be negative", d.name, d.v)
		}
	}
	if c.OnlineDuty < 0 || c.OnlineDuty > 1 {
		bad("OnlineDuty %v: want above 0 and at most 1", c.OnlineDuty)
	}
	if c.ProbeRate < 0 || c.ProbeRate > 1000 {
		bad("ProbeRate %v: want above 0 and at most 1000 requests/s", c.ProbeRate)
	}
	if c.OnlineTouch > 0 && c.OnlineMemory > 0 && c.OnlineTouch > c.OnlineMemory {
		bad("OnlineTouch %d exceeds OnlineMemory %d: the pod would be killed at its limit", c.OnlineTouch, c.OnlineMemory)
	}
	if c.OfflineTouch > 0 && c.OfflineMemory > 0 && c.OfflineTouch > c.OfflineMemory {
		bad("OfflineTouch %d exceeds OfflineMemory %d: the pod would be killed at its limit", c.OfflineTouch, c.OfflineMemory)
	}
	if c.MaxOffline > 1000 {
		bad("MaxOffline %d: at most 1000", c.MaxOffline)
	}
	return errors.Join(errs...)
}

// withDefaults fills c's zero fields; hostCPU and hostMemory are the
// host's.
func (c Config) withDefaults(hostCPU, hostMemory int64) Config {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.NodeCPU, hostCPU)
	def(&c.NodeMemory, min(4<<30, hostMemory))
	if c.OnlinePods == 0 {
		c.OnlinePods = 2
	}
	def(&c.OnlineCPU, c.NodeCPU*35/100)
	def(&c.OnlineMemory, c.NodeMemory*15/100)
	if c.OnlineDuty == 0 {
		c.OnlineDuty = 0.1
	}
	if c.OnlinePeriod == 0 {
		c.OnlinePeriod = 100 * time.Millisecond
	}
	def(&c.OnlineTouch, min(32<<20, c.OnlineMemory))
	def(&c.ProbeCPU, c.NodeCPU/10)
	def(&c.ProbeMemory, 64<<20)
	if c.ProbeRate == 0 {
		c.ProbeRate = 50
	}
	def(&c.OfflineCPU, 250)
	def(&c.OfflineMemory, 256<<20)
	def(&c.OfflineTouch, min(192<<20, c.OfflineMemory))
	if c.OfflineStep == 0 {
		c.OfflineStep = 2
	}
	if c.MaxOffline == 0 {
		c.MaxOffline = 64
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	dur(&c.RefuseWait, 3*time.Second)
	dur(&c.Warmup, 3*time.Second)
	dur(&c.Unloaded, 10*time.Second)
	dur(&c.Loaded, 20*time.Second)
	dur(&c.SampleEvery, time.Second)
	dur(&c.Timeout, 5*time.Minute)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Targets of the issue (Hippo reaches 115% allocated).
const (
	TargetAllocation = 1.30 // allocated requests / capacity, CPU
	TargetProbeRatio = 1.10 // loaded probe p99 / unloaded probe p99
	HippoAllocation  = 1.15
)

// Sample is one step of the time series.
type Sample struct {
	// T is seconds since the online pods were submitted.
	T float64 `json:"t"`
	// Phase is "online", "unloaded", "fill", "loaded" or "stop".
	Phase string `json:"phase"`
	// Allocation is what the node's tasks ask for over its capacity, CPU
	// (both tiers); MemoryAllocation the same for memory.
	Allocation       float64 `json:"allocation"`
	MemoryAllocation float64 `json:"memory_allocation"`
	// Utilization is the host's CPU utilisation over the overcommit
	// loop's last period (every process on the host).
	Utilization float64 `json:"utilization"`
	// OnlineCPUMillis and OfflineCPUMillis are the tiers' CPU use (the
	// loop's EWMA); OfflineQuotaMillis the offline tier's quota.
	OnlineCPUMillis    int64 `json:"online_cpu_millis"`
	OfflineCPUMillis   int64 `json:"offline_cpu_millis"`
	OfflineQuotaMillis int64 `json:"offline_quota_millis"`
	// OfflineRunning and OfflinePending count the offline tasks.
	OfflineRunning int `json:"offline_running"`
	OfflinePending int `json:"offline_pending"`
}

// Result is a run's figures; its JSON is `sluice bench overcommit
// --json`'s last line.
type Result struct {
	// Mode is "containers" for Run.
	Mode       string `json:"mode"`
	NodeCPU    int64  `json:"node_cpu_millis"`
	NodeMemory int64  `json:"node_memory_bytes"`
	OnlinePods int    `json:"online_pods"`
	// OnlineRequestRatio is what online work asks for over capacity, CPU.
	OnlineRequestRatio float64 `json:"online_request_ratio"`
	// OfflinePlaced and OfflinePending count the offline tasks at the
	// end of the fill; RefusedReason is why placement left them pending.
	OfflinePlaced  int    `json:"offline_placed"`
	OfflinePending int    `json:"offline_pending"`
	RefusedReason  string `json:"refused_reason,omitempty"`
	// AllocationRatio is the highest CPU allocation of the loaded phase:
	// the tasks' requests, both tiers, over the node's capacity;
	// MemoryAllocationRatio the same for memory.
	AllocationRatio       float64 `json:"allocation_ratio"`
	MemoryAllocationRatio float64 `json:"memory_allocation_ratio"`
	// Utilization is the host's mean CPU utilisation in the loaded phase;
	// UtilizationUnloaded the same in the unloaded phase.
	Utilization         float64 `json:"utilization"`
	UtilizationUnloaded float64 `json:"utilization_unloaded"`
	// BackgroundCPUMillis is the host's mean CPU use in the unloaded phase
	// outside the run's pods: this process (dispatcher, nodelet, probe
	// client) and everything else on the host. On a shared host it says
	// how much of the probe's tail is others' load.
	BackgroundCPUMillis float64 `json:"background_cpu_millis"`
	// OnlineCPUMillis and OfflineCPUMillis are the tiers' mean CPU use in
	// the loaded phase.
	OnlineCPUMillis  float64 `json:"online_cpu_millis"`
	OfflineCPUMillis float64 `json:"offline_cpu_millis"`
	// The probe: p50/p99 in the loaded phase and in the unloaded anchor.
	ProbeP50Ms         float64 `json:"probe_p50_ms"`
	ProbeP99Ms         float64 `json:"probe_p99_ms"`
	ProbeP50UnloadedMs float64 `json:"probe_p50_unloaded_ms"`
	ProbeP99UnloadedMs float64 `json:"probe_p99_unloaded_ms"`
	ProbeRequests      int     `json:"probe_requests"`
	ProbeErrors        int     `json:"probe_errors"`
	// OnlineThrottledMs is the CPU throttling of the online tier and its
	// pods over the run, from their cgroups' cpu.stat; OnlineThrottledPeriods
	// the periods throttled.
	OnlineThrottledMs      float64 `json:"online_throttled_ms"`
	OnlineThrottledPeriods uint64  `json:"online_throttled_periods"`
	// OfflineKilled counts offline pods killed for memory: by the
	// nodelet's memory killer (host memory short) and by the kernel at a
	// pod's limit; OfflineKilledBy by reason (api.ReasonMemoryKiller,
	// api.ReasonOOMKilled). OfflineRetried counts the earlier attempts of
	// the offline tasks, whatever ended them.
	OfflineKilled   int            `json:"offline_killed"`
	OfflineKilledBy map[string]int `json:"offline_killed_by,omitempty"`
	OfflineRetried  int            `json:"offline_retried"`
	Seconds         float64        `json:"seconds"`
	Series          []Sample       `json:"series"`
}

// Check is one target and whether the run met it.
type Check struct {
	Name, Value, Target string
	Met                 bool
}

// Checks are r's figures against the targets: allocation, probe
// p99 against its unloaded anchor, online throttling.
func (r Result) Checks() []Check {
	ratio := 0.0
	if r.ProbeP99UnloadedMs > 0 {
		ratio = r.ProbeP99Ms / r.ProbeP99UnloadedMs
	}
	return []Check{
		{"allocated / capacity (CPU)", fmt.Sprintf("%.0f%%", 100*r.AllocationRatio),
			fmt.Sprintf("≥ %.0f%% (Hippo %.0f%%)", 100*TargetAllocation, 100*HippoAllocation), r.AllocationRatio >= TargetAllocation},
		{"probe p99 loaded / unloaded", fmt.Sprintf("%.1f / %.1f ms (%.2f×)", r.ProbeP99Ms, r.ProbeP99UnloadedMs, ratio),
			fmt.Sprintf("≤ %.2f×", TargetProbeRatio), ratio > 0 && ratio <= TargetProbeRatio},
		{"online throttled", fmt.Sprintf("%.1f ms", r.OnlineThrottledMs), "0 ms", r.OnlineThrottledMs == 0},
	}
}
