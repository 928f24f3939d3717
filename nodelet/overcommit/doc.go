// Package overcommit implements Hippo's online/offline overcommit model for
// the nodelet: offline (batch) pods borrow what online pods leave idle.
//
// It has two layers, in the shape of etcd's RawNode and its node loop:
//
//   - Controller is pure: Step(now, HostSample, []PodSample) Decision does
//     no I/O, reads no clock and starts no goroutine; given the same Params
//     and the same sequence of inputs it returns the same decisions. All
//     the rules live there and are tested with recorded sequences in
//     testdata/.
//   - Loop is the thin I/O shell: once per period (1 s by default) it reads
//     /proc/stat and /proc/meminfo and the tier and pod cgroups (through
//     nodelet/cgroup), calls Step, writes the offline tier's CPU quota and
//     memory limit, asks a Killer to kill the chosen pods, writes each
//     offline pod's resource file atomically (a new file renamed over the
//     old, so containers see it through a bind mount of its directory: one
//     of the file would keep showing the old inode) when its guarantee
//     changed or its limit moved by 5% or more from the one in the file,
//     and keeps the last report.
//
// The rules (defaults in Params):
//
//   - CPU: host utilization is kept under a watermark (80%). Below it (minus
//     a 5% dead band) the offline tier's quota grows by max(25%, 100m),
//     never by more than the headroom under the watermark; above it the
//     quota drops to min(half, quota-excess). The quota stays within
//     [OfflineCPUMinMillis, OfflineCPUMaxMillis]: never zero, so offline
//     work is never starved. The online tier is never throttled: the
//     controller has no output for it and the Loop never writes it.
//   - Memory is lent conservatively: idle online memory (online requests
//     minus online working set) is lent at 80% up to 10% of host memory and
//     at 30% beyond; the offline limit is guarantee + lendable, capped so
//     that projected use stays under a 70% watermark, and never below the
//     guarantee.
//   - When MemAvailable stays under 5% of MemTotal for the grace period
//     (5 s), offline pods are killed in user space, lowest priority first,
//     then shortest run time, then largest working set, until the projected
//     available memory is back above the threshold. Every kill carries a
//     reason. Online pods are never chosen. A kill round re-arms the grace
//     period, so memory has time to come back before the next one.
//   - Each offline pod gets a guaranteed amount (its request, scaled down
//     when the offline requests exceed the offline guarantee) and a limit
//     (what the offline tier allows minus what the other offline pods use).
//   - An offline pod about to start is reserved (Loop.Reserve): its memory
//     request is added to the offline tier's limit at once, and it counts
//     in the offline guarantee until the loop measures it in its cgroup,
//     so that it never starts under a limit made for the pods before it.
//     Its resource file keeps its requests until then.
//   - Usage per pod and per tier is reported with an EWMA (alpha 0.3).
//
// Invariants: the offline quota is within [min, max] after every Step;
// kills name only offline pods; every goroutine the package runs is the
// caller's, inside Loop.Run, and returns when its context is done.
//
// Usage:
//
//	loop, err := overcommit.NewLoop(overcommit.Config{
//		Cgroups: mgr, Pods: agent, Killer: agent,
//	})
//	go func() { errc <- loop.Run(ctx) }()
//	...
//	rep, ok := loop.LastReport()
package overcommit
