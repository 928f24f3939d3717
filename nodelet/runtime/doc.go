// Package runtime defines how the nodelet runs pods on its host: the Runtime
// interface every runtime implements (the libcontainer runtime in
// nodelet/runtime/container, the simulated one in nodelet/runtime/sim), the
// PodSpec a runtime is given, derived from api types, and the errors callers
// act on. The conformance suite in nodelet/runtime/runtimetest pins the
// contract.
//
// # Invariants
//
//   - A pod is identified by its ID on one host; Generation and
//     CgroupParent are recorded and reported back but never interpreted.
//   - Start either leaves a running pod or leaves nothing: no state, no
//     cgroup, no process.
//   - A pod ends exactly once; Wait reports the same Exit to every caller,
//     and so does the callback of a Notifier (an optional interface, for
//     runtimes that learn of ends themselves, as the simulated one does),
//     once per Notify.
//   - A runtime that says it is Immediate (an optional marker) returns
//     from Start and Remove at once, so a caller may call them from a loop
//     that must not block.
//   - Pods outlive the Runtime value that started them: Close releases the
//     value, not the pods, and a new Runtime over the same host lists and
//     adopts them.
//   - Only Remove forgets a pod; until then its status and logs stay
//     readable.
//   - A pod's scratch volumes are made with it and removed with it; host
//     path volumes come resolved by the caller below a volume root
//     (ResolveHostPath), and a runtime that mounts them never leaves that
//     root (Volume.HostRoot). Refusals are ErrVolumeDenied errors.
//
// # Usage
//
//	spec := runtime.FromAPI("pod-1", 1, "sluice/offline", &apiPod)
//	if err := rt.Start(ctx, spec); err != nil { ... }
//	exit, err := rt.Wait(ctx, "pod-1")
//	...
//	_ = rt.Remove(ctx, "pod-1")
package runtime
