// Package sim is a runtime.Runtime whose pods run no processes: a pod
// "runs" for the RunTime of its SimSpec (forever without one) and then
// exits with its ExitCode, and meanwhile uses what its SimSpec's Usage
// says at each moment, which the Runtime reports as a runtime.Meter (so
// that a simulated node's heartbeats carry usage as a real node's do). It
// lets tests and benchmarks run thousands of pods in one process: a pod
// costs a map entry and a place in its Host's queue of run times, which one goroutine per Host (its clock) ends as
// they are over (a run time of centuries, past what its clock counts,
// never is). A timer per pod would cost a goroutine at each pod's end, and
// 7–10% more of a simulated fleet's CPU per task (goroutines made and
// scheduled, and the collector work their first allocations owe).
//
// A Host's time is a clock.Clock: the system clock (NewHost), or one a
// test drives (NewHostOn with a clock.Manual), on which pods start, run
// their RunTime and end.
//
// A Host stands for the machine: pods belong to it and outlive the
// Runtime values over it, so a new Runtime over the same Host adopts them
// as a restarted nodelet would. Stop behaves as a process that obeys
// SIGTERM: the pod ends at once with code 143. Pods print nothing, so
// their logs are empty. The Runtime is a runtime.Notifier: the Host's
// clock calls the callbacks waiting for a pod's end, so a caller need not
// keep a goroutine in Wait per pod. It is a runtime.Immediate too: Start
// and Remove only change the Host's map and queue.
//
// # Invariants
//
//   - The Host's queue holds every running pod that has a run time, by
//     when it is over, and pods that ended sooner (stopped, or the Host
//     closed) until then, or until they are more than half of it and
//     more than 64: it is compacted then. Its clock goroutine
//     starts with the first such pod and returns when the Host closes;
//     Close waits for it. It calls the callbacks of the pods it ends, one
//     after another, so a callback must not wait long. The package starts
//     other goroutines only to call Notify's callbacks of a pod that had
//     already ended, or that Stop or Close ended, each ending when its
//     callbacks return; callbacks are never called under the Host's
//     mutex.
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
