// Package sim is a runtime.Runtime whose pods run no processes: a pod
// "runs" for the RunTime of its SimSpec (forever without one) and then
// exits with its ExitCode. It lets tests and benchmarks run thousands of
// pods in one process: a pod costs a map entry and a timer.
//
// A Host stands for the machine: pods belong to it and outlive the
// Runtime values over it, so a new Runtime over the same Host adopts them
// as a restarted nodelet would. Stop behaves as a process that obeys
// SIGTERM: the pod ends at once with code 143. Pods print nothing, so
// their logs are empty. The Runtime is a runtime.Notifier: a pod's timer
// calls the callbacks waiting for its end, so a caller need not keep a
// goroutine in Wait per pod. It is a runtime.Immediate too: Start and
// Remove only change the Host's map and set or stop a timer.
//
// # Invariants
//
//   - Every timer of a pod is stopped when the pod ends or the Host
//     closes. The package starts goroutines only to call Notify's
//     callbacks (of a pod that had already ended, or that Stop or Close
//     ended), each ending when its callbacks return; callbacks are never
//     called under the Host's mutex.
//   - A pod ends exactly once; its done channel is closed under the
//     Host's mutex, after its Exit is set.
//
// # Usage
//
//	h := sim.NewHost()
//	defer h.Close()
//	rt := sim.New(h)
//	err := rt.Start(ctx, spec)
package sim
