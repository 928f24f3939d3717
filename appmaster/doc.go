// Package appmaster is the SDK for appmasters: programs that lease
// capboxes (resource slots on nodes) from the dispatcher and decide
// themselves how long each lives (DESIGN.md, "Appmaster"; Capos'
// capbox, YARN's containers).
//
// An appmaster is a job with api.JobSpec.Appmaster set. In client mode,
// Register submits one with no task groups for a program that runs
// outside the cluster. In cluster mode the job's task runs the program in
// a pod, and AttachFromEnv (or Attach with no client and no job) takes
// all it needs from the environment the node gives that pod: the
// dispatcher's URLs (SLUICE_ADDR), the job's token (SLUICE_TOKEN) and
// its ID (SLUICE_JOB_ID). The job token may read the job and its part of
// the watch stream, lease and release its capboxes and start and stop
// tasks in them, and cancel the job, nothing else (Nodes, for one, is
// refused), and only until the job ends: a cluster-mode appmaster
// releases its capboxes and exits 0 for its job to succeed (Stop would
// cancel it), or exits non-zero to fail its attempt.
// Attach also recovers an appmaster after a restart: each capbox it still
// holds is offered to a recover function, which re-attaches a handler or
// drops it.
//
// CreateCapboxes asks for a request's capboxes (one capbox set; an
// AllOrNothing request is placed whole or not at all) with a Handler that
// Run calls once when each capbox is running and once when it has ended
// (released, failed or lost). Release gives capboxes back; Stop cancels
// the appmaster's job, which releases all of them, as its job ending
// does.
//
// StartTask runs one of the appmaster's own tasks in a running capbox, on
// the capbox's node and inside its resources (tasks that would hold more
// than the capbox are refused); a TaskHandler is told once when it runs
// and once when it ends. A capbox can run many tasks, one after another
// or side by side (Fuxi's grant reuse). StopTasks stops them; releasing
// a capbox ends its tasks.
//
// Run follows the dispatcher's watch stream from the index of a capbox
// listing: a change of one of the appmaster's sets makes it list the
// capboxes again and call the handlers for what changed, so no change is
// missed between a listing and the stream. Handlers run one at a time on
// Run's goroutine.
//
// The package speaks only the HTTP API (api.Client). On a node with the
// container runtime a capbox is a sandbox whose cgroup holds the capbox's
// limits, and its tasks are containers that join the sandbox's network,
// IPC and UTS namespaces inside that cgroup.
package appmaster
