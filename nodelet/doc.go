// Package nodelet is the host agent: it converges its host to the set of
// pods the dispatcher wants (the target), runs them through a
// runtime.Runtime under the cgroup tier of their QoS, reports every state
// change, and lets the overcommit loop see and kill offline pods.
//
// # Shape
//
// One goroutine (the owner, inside Run) owns desired and actual state. It
// never blocks on the runtime: each Start, Stop and Remove runs in a
// goroutine of its own (Start and Remove bounded by
// Config.MaxConcurrentStarts), and one goroutine per running pod only
// Waits (none when the runtime is a runtime.Notifier, as the simulated one
// is: its callback reports the end); all of them post events back on a
// channel. A runtime.Immediate (the simulated one again), whose Start and
// Remove return at once, is called from the owner's loop instead, and what
// the calls would have posted is handled before the loop waits again. Two more goroutines
// talk to the Dispatcher: one long-polls Target and hands new targets to
// the owner, one sends the report outbox in order and retries with
// backoff until acknowledged. With Config.Overcommit, Run also runs the
// overcommit loop, for which the Agent is the PodSource and the Killer,
// and, when the Dispatcher is a UsageReporter, a goroutine that sends the
// loop's per-tier usage every Config.HeartbeatPeriod, with the offline
// tier's quota the loop decided at the same step (api.OvercommitStatus).
// With Config.RuntimeUsage instead, that goroutine sends what the Runtime
// (a runtime.Meter: the simulated one) reports the running pods use, in
// the same shape, without an overcommit status. With Config.ResourceDir, each offline pod gets a directory there with its
// resource file, written from its requests before it starts and by the
// loop after, which its containers read at /run/sluice/resources.json.
//
// # Rules
//
//   - A desired pod that is absent is started under
//     <CgroupRoot>/<tier>; offline pods get no CPU quota of their own, as
//     the offline tier's quota bounds them (cgroup v1 refuses a child quota
//     above its parent's).
//   - A pod that is not desired, or desired with another generation, is
//     stopped (SIGTERM, SIGKILL after StopGrace) and reported killed with
//     reason "stopped".
//   - A running pod whose Group has a MaxRunTime is stopped (SIGTERM,
//     SIGKILL after StopGrace) that long after it started, by the
//     runtime's clock for an adopted pod, and reported killed with reason
//     "time_limit".
//   - Every container of a pod gets the node's identity of it in its
//     environment (api.EnvJobID and the others: job, group, task, index,
//     count, attempt, node, dispatcher URLs, the node's HostIP), after its
//     own Env; the containers of an appmaster job's own pods also get its
//     job token (api.EnvToken, from the target), never logged. In a
//     bridge-mode pod the dispatcher URLs name HostIP instead of loopback,
//     which in the pod is the pod itself.
//   - A pod runs in its spec's network mode, else DefaultNetwork (bridge);
//     one in host mode on a node without AllowHostNetwork fails at once
//     with reason "network_denied" and never starts.
//   - A pod that ended, or failed to start, is not started again while the
//     target keeps it: the dispatcher retries tasks, not the agent.
//   - Host path volumes are resolved against Config.VolumeRoots before the
//     runtime sees the pod, whichever runtime it is
//     (runtime.PodSpec.ResolveHostPaths): a pod with a path below no root,
//     leading out of its root through a symbolic link, or mounted writable
//     below a read-only root is never started.
//   - Reports: running; exited (succeeded, or failed with the code);
//     failed with reason "scratch_full" when it exited non-zero with a
//     scratch volume full (runtime.Exit.ScratchFull); OOM-killed; killed
//     by the memory killer with its reason; failed to start with the error
//     (reason "image_denied" when the runtime refused an image outside the
//     host's image roots, runtime.ErrImageDenied; "volume_denied" when the
//     node or the runtime refused a host path, runtime.ErrVolumeDenied;
//     "network_denied" when the node refused the pod's network mode; else
//     "start_failed"); lost when the exit status is unknown. They are
//     delivered at least once and in order; an ended pod is removed from
//     the runtime only after its final report is acknowledged, so a crash
//     loses nothing.
//   - Recovery: Run first lists the runtime. Running pods are adopted
//     (watched, never started again) and re-reported as running once the
//     first target names them; those the first target does not want are
//     stopped; pods that ended while no agent ran are reported and removed.
//     Before the first target nothing is started or stopped.
//
// # Invariants
//
//   - Only the owner goroutine reads or writes the pod table; other
//     goroutines see a published copy (Pods, Stats).
//   - The owner's work follows what changed, not how many pods it has: a
//     target, an event, a kill or a resync marks the pods it concerns, and
//     only those are reconciled and republished; ended pods due for
//     removal wait in a queue in the order of their final reports. A
//     target that comes as the changes since the last one (Target.Base) is
//     applied change by change; one whose base is not the target the agent
//     holds is refused (counted in Stats.TargetErrors) and the whole target
//     asked for.
//   - Every goroutine Run starts has returned when Run returns; pods keep
//     running for the next agent.
//   - A pod ID and generation is started at most once per agent.
//
// # Usage
//
//	a, err := nodelet.New(nodelet.Config{Node: "host-1", Runtime: rt, Dispatcher: d})
//	if err != nil { ... }
//	go func() { errc <- a.Run(ctx) }()
//	...
//	a.Close()
package nodelet
