package nodelet

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path"
	"strings"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/overcommit"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

// Config configures an Agent. Zero values mean the documented defaults.
type Config struct {
	// Node is the node's name in the cluster. Required.
	Node string
	// Runtime runs the pods. Required. The Agent never closes it.
	Runtime runtime.Runtime
	// Dispatcher is where targets come from and reports go. Required.
	Dispatcher Dispatcher
	// Addr is the dispatcher base URLs the node uses, comma-separated,
	// which every container gets as api.EnvAddr. Default "": the
	// variable is not set.
	Addr string
	// DefaultNetwork is the network mode (runtime.NetworkBridge, Host or
	// None) of a pod whose spec names none. Default runtime.NetworkBridge.
	DefaultNetwork string
	// AllowHostNetwork lets pods run in the host's network namespace;
	// without it a pod in host mode (asked for, or by DefaultNetwork)
	// fails at once with api.ReasonNetworkDenied. Default false.
	AllowHostNetwork bool
	// HostIP is the node's address as other hosts and the node's pods
	// reach it, an IP address that is not loopback: every container gets
	// it as api.EnvHostIP, and in a bridge-mode pod's api.EnvAddr it
	// replaces each loopback host (loopback in a pod is the pod itself).
	// Default "": neither.
	HostIP string
	// CgroupRoot is the cgroup, relative to each hierarchy's root, that
	// holds the tiers: a pod goes under CgroupRoot/<tier>/<pod ID>. It
	// matches nodelet/cgroup's Config.Root without the leading slash.
	// Default "sluice".
	CgroupRoot string
	// StopGrace is the time between SIGTERM and SIGKILL when a pod is no
	// longer wanted. Default 10s.
	StopGrace time.Duration
	// KillGrace is the same for pods the memory killer chooses. Default
	// 0: SIGKILL at once, since memory is short.
	KillGrace time.Duration
	// MaxConcurrentStarts bounds the runtime Start and Remove calls in
	// flight. Default 4.
	MaxConcurrentStarts int
	// ReportBatch is the most reports sent in one Report call, at most
	// api.MaxItemsPerRequest. Default 256.
	ReportBatch int
	// RetryMin and RetryMax bound the exponential backoff between failed
	// Target or Report calls. Defaults 100ms and 5s.
	RetryMin, RetryMax time.Duration
	// RetainExited keeps an ended pod (its logs, its state) in the runtime
	// this long after it ended before removing it, so that its output can
	// still be read; it is removed at the first reconcile after that
	// (within ResyncPeriod). Default 0: removed as soon as its final
	// report is acknowledged.
	RetainExited time.Duration
	// ResyncPeriod is how often the agent reconciles without a new event,
	// retrying what failed (a Stop, a Remove). Default 10s.
	ResyncPeriod time.Duration
	// HeartbeatPeriod is how often the agent sends the node's usage, as
	// the overcommit loop last measured it (or the Runtime reports it,
	// with RuntimeUsage), when Dispatcher implements UsageReporter.
	// Without either there is no usage and no heartbeat is sent. Default
	// 10s.
	HeartbeatPeriod time.Duration
	// Overcommit, when set, runs the overcommit control loop inside Run
	// with this configuration; its Pods and Killer are the Agent (any
	// value set there is replaced), and its Clock, when nil, is Clock.
	// Leave nil on hosts without cgroups.
	Overcommit *overcommit.Config
	// RuntimeUsage, when set, has the agent send in its heartbeats the
	// usage its Runtime reports (a runtime.Meter, such as the simulated
	// runtime, whose pods use what their spec says) as it sends an
	// overcommit loop's measurements on a host with cgroups: each
	// running pod's usage under its task, each tier's sum, and their
	// total, as of the heartbeat. Validate refuses it with Overcommit,
	// or with a Runtime that is not a runtime.Meter. Default false.
	RuntimeUsage bool
	// ResourceDir, when set, holds a directory per offline pod,
	// ResourceDir/<pod ID>, with the pod's resource file (ResourceFile):
	// its guarantee and limit, as its requests at the start and as the
	// overcommit loop changes them after. The runtime shows the directory
	// read-only in each of the pod's containers (runtime.PodSpec.
	// ResourceDir), at runtime.ResourceMount. A clean absolute path;
	// default "": no resource files.
	ResourceDir string
	// VolumeRoots are the host directories below which pods may mount
	// host paths (api.HostPathVolume): a path below none, leading out of
	// its root through a symbolic link, or mounted writable below a root
	// that is not Writable fails its task at once with
	// api.ReasonVolumeDenied (runtime.ResolveHostPath). Each is a clean
	// absolute path other than "/", given once. Default none: every host
	// path is refused.
	VolumeRoots []runtime.VolumeRoot
	// Observer, when set, is told how long pod starts, target polls and
	// reports took, for metrics. Default none.
	Observer Observer
	// Logger receives what the agent does. Default: discarded.
	Logger *slog.Logger
	// Clock times the agent's loops (resync, run-time limits, heartbeats,
	// retries) and stamps its reports and start times; the runtime's own
	// waits (a stop's grace, a process's exit) stay on real time. Default
	// the system clock.
	Clock clock.Clock
}

// Defaults of Config.
const (
	DefaultCgroupRoot          = "sluice"
	DefaultStopGrace           = 10 * time.Second
	DefaultMaxConcurrentStarts = 4
	DefaultReportBatch         = 256
	DefaultRetryMin            = 100 * time.Millisecond
	DefaultRetryMax            = 5 * time.Second
	DefaultResyncPeriod        = 10 * time.Second
	DefaultHeartbeatPeriod     = 10 * time.Second
)

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("nodelet: config: "+format, args...))
	}
	if c.Node == "" {
		add("Node is required")
	} else if strings.ContainsAny(c.Node, "/ \t\n") {
		add("Node %q must not contain '/' or spaces", c.Node)
	}
	if c.Runtime == nil {
		add("Runtime is required")
	}
	if c.Dispatcher == nil {
		add("Dispatcher is required")
	}
	if strings.ContainsAny(c.Addr, "\x00\n") {
		add("Addr %q must not contain NUL or newlines", c.Addr)
	}
	switch c.DefaultNetwork {
	case "", runtime.NetworkBridge, runtime.NetworkHost, runtime.NetworkNone:
	default:
		add("DefaultNetwork %q: want %q, %q or %q", c.DefaultNetwork, runtime.NetworkBridge, runtime.NetworkHost, runtime.NetworkNone)
	}
	if c.HostIP != "" {
		if ip, err := netip.ParseAddr(c.HostIP); err != nil || ip.Zone() != "" {
			add("HostIP %q is not an IP address", c.HostIP)
		} else if ip.IsLoopback() || ip.IsUnspecified() {
			add("HostIP %s must be an address pods and other hosts reach, not loopback or unspecified", c.HostIP)
		}
	}
	if r := c.CgroupRoot; r != "" {
		if strings.HasPrefix(r, "/") || path.Clean(r) != r || r == "." || strings.Contains(r, "..") {
			add("CgroupRoot %q must be a clean relative cgroup path such as %q", r, DefaultCgroupRoot)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"StopGrace", c.StopGrace}, {"KillGrace", c.KillGrace}, {"RetryMin", c.RetryMin}, {"RetryMax", c.RetryMax}, {"ResyncPeriod", c.ResyncPeriod}, {"RetainExited", c.RetainExited}, {"HeartbeatPeriod", c.HeartbeatPeriod}} {
		if d.v < 0 {
			add("%s %v must not be negative", d.name, d.v)
		}
	}
	if c.RetryMin > 0 && c.RetryMax > 0 && c.RetryMin > c.RetryMax {
		add("RetryMin %v exceeds RetryMax %v", c.RetryMin, c.RetryMax)
	}
	if c.MaxConcurrentStarts < 0 {
		add("MaxConcurrentStarts %d must not be negative", c.MaxConcurrentStarts)
	}
	if c.ReportBatch < 0 || c.ReportBatch > api.MaxItemsPerRequest {
		add("ReportBatch %d: want 0 (the default) to %d, the most items a request may carry", c.ReportBatch, api.MaxItemsPerRequest)
	}
	if d := c.ResourceDir; d != "" && (!path.IsAbs(d) || path.Clean(d) != d) {
		add("ResourceDir %q must be a clean absolute path", d)
	}
	seen := map[string]bool{}
	for _, r := range c.VolumeRoots {
		switch {
		case !path.IsAbs(r.Path) || path.Clean(r.Path) != r.Path:
			add("VolumeRoots: %q must be a clean absolute path", r.Path)
		case r.Path == "/":
			add("VolumeRoots: %q must not be the host's root", r.Path)
		case seen[r.Path]:
			add("VolumeRoots: %q given twice", r.Path)
		}
		seen[r.Path] = true
	}
	if c.Overcommit != nil && c.Overcommit.Cgroups == nil {
		add("Overcommit.Cgroups is required when Overcommit is set")
	}
	if c.RuntimeUsage {
		if c.Overcommit != nil {
			add("RuntimeUsage and Overcommit are exclusive: the usage is one or the other's")
		}
		if _, ok := c.Runtime.(runtime.Meter); c.Runtime != nil && !ok {
			add("RuntimeUsage: Runtime %T does not report usage (runtime.Meter)", c.Runtime)
		}
	}
	return errors.Join(errs...)
}

func (c *Config) setDefaults() {
	if c.CgroupRoot == "" {
		c.CgroupRoot = DefaultCgroupRoot
	}
	if c.DefaultNetwork == "" {
		c.DefaultNetwork = runtime.NetworkBridge
	}
	if c.StopGrace == 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.MaxConcurrentStarts == 0 {
		c.MaxConcurrentStarts = DefaultMaxConcurrentStarts
	}
	if c.ReportBatch == 0 {
		c.ReportBatch = DefaultReportBatch
	}
	if c.RetryMin == 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax == 0 {
		c.RetryMax = max(DefaultRetryMax, c.RetryMin)
	}
	if c.ResyncPeriod == 0 {
		c.ResyncPeriod = DefaultResyncPeriod
	}
	if c.HeartbeatPeriod == 0 {
		c.HeartbeatPeriod = DefaultHeartbeatPeriod
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Clock = clock.OrSystem(c.Clock)
}

// Observer is told how long the agent's operations took, for metrics. Its
// methods are called from the agent's goroutines, as the operations end,
// and must return quickly.
type Observer interface {
	// PodStarted: a pod of tier started, d after the agent decided to
	// start it (the wait for a start slot, MaxConcurrentStarts, included).
	PodStarted(tier cgroup.Tier, d time.Duration)
	// TargetPolled: a Target call returned after d (a long-poll's wait
	// included) with err. Calls cut short by the agent's end are not told.
	TargetPolled(d time.Duration, err error)
	// Reported: a Report call returned after d with err. Calls cut short
	// by the agent's end are not told.
	Reported(d time.Duration, err error)
}
