package api

import "time"

// The HTTP API's paths. {id} and {name} are path segments; the server
// routes on these exact shapes.
const (
	// PathJobs: POST submits jobs (one, a JSON array or NDJSON; gzip or
	// zstd Content-Encoding) and answers SubmitResponse; GET lists them,
	// live jobs and the summaries of forgotten ones (JobStatus.History)
	// together by ID (JobList; query: state, queue, label=k=v, history
	// (HistoryInclude, HistoryExclude, HistoryOnly), after, limit).
	PathJobs = "/v1/jobs"
	// PathJob is PathJobs + "/{id}": GET a JobStatus (a forgotten
	// job's summary while it is kept), DELETE cancels
	// (CancelResponse). PathJob + "{id}/capboxes" serves an appmaster's
	// capboxes: POST creates them (capbox requests as POST /v1/jobs takes
	// jobs; CreateCapboxesResponse), GET lists them (CapboxList), DELETE
	// with one or more id parameters releases them
	// (ReleaseCapboxesResponse). PathJob + "{id}/captasks" serves the
	// tasks an appmaster runs in its capboxes: POST starts them
	// (CapTaskSpec items; StartCapTasksResponse), DELETE with id
	// parameters stops them (StopCapTasksResponse); they are listed with
	// their capboxes. PathJob + "/tasks" lists the job's tasks
	// (TaskList; query: state, after, limit).
	PathJob = "/v1/jobs/"
	// PathTasks + "{id}/logs" is a task's output, proxied from the nodelet
	// that ran it (query as PathNodeletLogs's).
	PathTasks = "/v1/tasks/"
	// PathNodes: GET lists nodes (NodeList; query as NodeQuery's: state,
	// after, limit); POST registers a node (NodeSpec, the nodelet role)
	// and answers RegisterResponse.
	PathNodes = "/v1/nodes"
	// PathNode is PathNodes + "/{name}". PathNode + "/target" long-polls
	// for the node's target (query: generation, the one the node has;
	// wait, the longest wait as a Go duration; diff=1, to get only the
	// change since generation when possible; identity=1, to get each
	// pod's TargetPod.JobName, Count and Token): 200 with a NodeTarget when
	// it differs, 304 when the wait ended without a change.
	// PathNode + "/reports" takes a ReportRequest (POST) and answers 204
	// once the reports are committed and its usage, if any, recorded.
	// PathNode + "/drain" drains the node (POST, a DrainRequest; the admin
	// role) or ends its drain (DELETE), and answers NodeDrainResponse.
	// DELETE PathNode + "{name}" removes a drained or down node without
	// active tasks (the admin role) and answers 204; 409 when it is not.
	PathNode = "/v1/nodes/"
	// PathQueues: GET lists the queues (QueueList).
	PathQueues = "/v1/queues"
	// PathQueue is PathQueues + "/{name}": POST sets the queue's settings
	// (QueueSettings, replacing the ones it had; role admin) and answers
	// with the queue's QueueStatus.
	PathQueue = "/v1/queues/"
	// PathWatch streams state changes as NDJSON WatchEvents (query: from,
	// the index to resume after).
	PathWatch = "/v1/watch"
	// PathHealth answers 200 while the process serves; PathReady 200 when
	// the replica knows a leader and has applied the log it knows of.
	PathHealth = "/healthz"
	PathReady  = "/readyz"
	// PathMetrics serves Prometheus metrics in the text format, on every
	// replica (the reader role) and on each nodelet's log server.
	PathMetrics = "/metrics"

	// PathNodeletLogs is served by each nodelet at its NodeSpec.Address:
	// GET with query task (the task ID), container (default: the pod's
	// first), follow=1 (keep streaming until the pod ends), tail (the last
	// N lines). The body is the container's output as text/plain.
	PathNodeletLogs = "/v1/logs"
)

// HeaderIdempotencyKey on a submit makes the whole request safe to retry:
// item i of a request with key K gets the job idempotency key "K/i"
// unless it sets its own.
const HeaderIdempotencyKey = "Idempotency-Key"

// SubmitResponse is the reply to a successful submit: the jobs' IDs, in
// the order of the request. Existing lists the indexes of the items that
// were already committed under their idempotency key.
type SubmitResponse struct {
	Jobs     []string `json:"jobs"`
	Existing []int    `json:"existing,omitempty"`
}

// Error codes of ErrorResponse.Code.
const (
	CodeInvalid          = "invalid"           // 400: see Problems
	CodeTooLarge         = "too_large"         // 413
	CodeUnsupportedMedia = "unsupported_media" // 415: content type or encoding
	CodeUnauthorized     = "unauthorized"      // 401: no or unknown token
	CodeForbidden        = "forbidden"         // 403: the token's role does not allow it
	CodeNotFound         = "not_found"         // 404
	CodeNotLeader        = "not_leader"        // 307 (with Location), or 503 when no leader is known or the replica has stopped: nothing was done
	CodeUnavailable      = "unavailable"       // 503: stopping, no quorum, timed out
	CodeConflict         = "conflict"          // 409: the request contradicts the state
	CodeInternal         = "internal"          // 500
)

// ErrorResponse is the body of every error reply.
type ErrorResponse struct {
	// Code is one of the Code constants, for programs.
	Code string `json:"code"`
	// Error says what went wrong, for people.
	Error string `json:"error"`
	// Problems lists every problem of an invalid request (CodeInvalid).
	Problems []Problem `json:"problems,omitempty"`
	// Total counts the problems, listed or not.
	Total int `json:"total,omitempty"`
	// Leader is the leader's HTTP base URL, when known (CodeNotLeader).
	Leader string `json:"leader,omitempty"`
}

// JobState is where a job is, rolled up from its tasks.
type JobState string

// Job states.
const (
	JobPending   JobState = "pending"   // no task has been placed yet
	JobRunning   JobState = "running"   // some task placed, running or done, some not done
	JobSucceeded JobState = "succeeded" // every task succeeded
	JobFailed    JobState = "failed"    // every task is done, at least one failed for good
	JobCancelled JobState = "cancelled" // cancelled by its user
)

// TaskCounts counts tasks by where they are. Pending + Active + Succeeded +
// Failed + Killed == Total.
type TaskCounts struct {
	Total     int64 `json:"total"`
	Pending   int64 `json:"pending"`
	Retrying  int64 `json:"retrying,omitempty"` // of Pending, waiting for a retry
	Active    int64 `json:"active"`             // assigned, starting or running
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"` // failed or lost with no attempt left
	Killed    int64 `json:"killed"` // killed, or dropped by a cancel
}

// Add adds o's counts to c.
func (c *TaskCounts) Add(o TaskCounts) {
	c.Total += o.Total
	c.Pending += o.Pending
	c.Retrying += o.Retrying
	c.Active += o.Active
	c.Succeeded += o.Succeeded
	c.Failed += o.Failed
	c.Killed += o.Killed
}

// GroupStatus is one task group's counts.
type GroupStatus struct {
	Name string `json:"name"`
	TaskCounts
}

// PendingReason says why tasks of a group were not placed in the last
// round that considered them.
type PendingReason struct {
	Group  string `json:"group"`
	Tasks  int64  `json:"tasks"`
	Reason string `json:"reason"`
}

// JobStatus is a job as the dispatcher knows it.
type JobStatus struct {
	ID        string    `json:"id"`
	State     JobState  `json:"state"`
	Submitted time.Time `json:"submitted"`
	// Spec is the job as submitted, with defaults applied; for a capbox
	// set, derived from its request and its appmaster.
	Spec JobSpec `json:"spec"`
	// Appmaster is, for a capbox set, the ID of the appmaster whose
	// request made it.
	Appmaster string `json:"appmaster,omitempty"`
	// Tasks sums Groups.
	Tasks  TaskCounts    `json:"tasks"`
	Groups []GroupStatus `json:"groups"`
	// Pending explains, for a job with pending tasks, why they were not
	// placed (only in GET /v1/jobs/{id}).
	Pending []PendingReason `json:"pending_diagnosis,omitempty"`
	// History marks the summary of a finished job the dispatcher has
	// forgotten (after its --job-retention), kept for its
	// --history-retention: Spec holds only the job's name, queue and
	// labels, Groups is empty, and Tasks are its tasks' final counts.
	History bool `json:"history,omitempty"`
	// Started is when a task of the job was first placed, and Ended when
	// its last task last changed (its submit time, for a job none of
	// whose tasks was placed); set in a summary only, Started only when
	// known.
	Started time.Time `json:"started,omitzero"`
	Ended   time.Time `json:"ended,omitzero"`
	// FirstFailure is, in a summary, the job's first task to fail for
	// good (failed, lost, or killed but not by a cancel); nil when none
	// did.
	FirstFailure *TaskFailure `json:"first_failure,omitempty"`
}

// TaskFailure is how a task of a job failed for good, as the job's
// summary keeps it.
type TaskFailure struct {
	Task     string     `json:"task"` // the attempt's ID
	State    TaskState  `json:"state"`
	Reason   TaskReason `json:"reason,omitempty"`
	ExitCode int32      `json:"exit_code,omitempty"`
	At       time.Time  `json:"at"`
}

// Values of the history parameter of GET PathJobs (JobQuery.History):
// whether a listing holds the summaries of forgotten jobs.
const (
	HistoryInclude = "include" // live jobs and summaries (the default)
	HistoryExclude = "exclude" // live jobs only
	HistoryOnly    = "only"    // summaries only
)

// JobList is a page of jobs, oldest first. Next, when set, is the value
// of the after parameter that fetches the next page.
type JobList struct {
	Jobs []JobStatus `json:"jobs"`
	Next string      `json:"next,omitempty"`
}

// CancelResponse is the reply to a cancel.
type CancelResponse struct {
	ID string `json:"id"`
	// Stopping counts the running tasks told to stop; Dropped the pending
	// tasks removed. Both are 0 when the job was cancelled before.
	Stopping int64 `json:"stopping"`
	Dropped  int64 `json:"dropped"`
}

// TaskStatus is a task that has been placed at least once.
type TaskStatus struct {
	ID      string    `json:"id"` // the current attempt's task ID
	Group   string    `json:"group"`
	Index   int64     `json:"index"`
	Attempt int64     `json:"attempt"`
	State   TaskState `json:"state"`
	Node    string    `json:"node"`
	// Host is where a client reaches the task's Ports: the node's
	// NodeSpec.HostIP, or when the node has none the host of its address
	// (NodeSpec.Address); empty when it has neither.
	Host string `json:"host,omitempty"`
	// Ports are the pod's ports, in the order its containers list them,
	// each with the number the attempt has on its node (static, or
	// assigned by the dispatcher from the node's range when the task was
	// placed) and its protocol.
	Ports    []Port     `json:"ports,omitempty"`
	Reason   TaskReason `json:"reason,omitempty"`
	ExitCode int32      `json:"exit_code,omitempty"`
	Updated  time.Time  `json:"updated"`
}

// TaskList is a page of a job's placed tasks in (group, index) order.
// Next, when set, is the after parameter of the next page.
type TaskList struct {
	Tasks []TaskStatus `json:"tasks"`
	Next  string       `json:"next,omitempty"`
}

// NodeInfo is a node as the dispatcher knows it.
type NodeInfo struct {
	Spec  NodeSpec  `json:"spec"`
	State NodeState `json:"state"`
	// Drained says an operator drained the node: it is draining, or down
	// and comes back draining. DrainDeadline is when its active tasks are
	// stopped and requeued (zero: none).
	Drained       bool      `json:"drained,omitempty"`
	DrainDeadline time.Time `json:"drain_deadline,omitzero"`
	// Generation is the node's target generation.
	Generation uint64 `json:"generation"`
	// Used is what its active tasks hold, Free what is left, per tier.
	Used  Allocatable `json:"used"`
	Free  Allocatable `json:"free"`
	Tasks int         `json:"tasks"`
	// Usage is what the node last said it uses (its last heartbeat with
	// usage), and LastHeartbeat when the leader received it. Both are
	// known to the leader only, from heartbeats since it started
	// leading: a follower's list, or a node that sent none, has neither.
	Usage         *NodeUsage `json:"usage,omitempty"`
	LastHeartbeat time.Time  `json:"last_heartbeat,omitzero"`
}

// DrainRequest asks that a node be drained: it takes no new task, and
// its active tasks run until the deadline, when they are stopped and
// requeued (reason drained), not counted as failed attempts. Without a
// deadline they run to their end. Draining a draining node sets its
// deadline anew.
type DrainRequest struct {
	// Deadline is when the node's active tasks are stopped; at most
	// MaxDrainDeadline.
	Deadline time.Time `json:"deadline,omitzero"`
	// Timeout is the deadline as a wait from when the dispatcher takes
	// the request, in place of Deadline (not both); at most
	// MaxDrainTimeout.
	Timeout Duration `json:"timeout,omitzero"`
}

// Bounds of a DrainRequest: its deadline must be a time the dispatcher's
// nanosecond clock can name.
var (
	MaxDrainDeadline = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxDrainTimeout  = Duration(100 * 365 * 24 * time.Hour)
)

// NodeDrainResponse answers a drain or an undrain.
type NodeDrainResponse struct {
	Name  string    `json:"name"`
	State NodeState `json:"state"`
	// Drained says the node is drained; DrainDeadline is its deadline.
	Drained       bool      `json:"drained,omitempty"`
	DrainDeadline time.Time `json:"drain_deadline,omitzero"`
	// Tasks counts the tasks active on the node; Stopped those the
	// request stopped, its deadline having passed.
	Tasks   int `json:"tasks"`
	Stopped int `json:"stopped,omitempty"`
}

// NodeList lists the registered nodes by name.
type NodeList struct {
	Nodes []NodeInfo `json:"nodes"`
	// Next, when set, is the after of the next page: the name of the
	// page's last node.
	Next string `json:"next,omitempty"`
}

// NodeQuery selects nodes for GET /v1/nodes: those in State (any when
// empty) named after After, in name order, at most Limit of them (1 to
// the server's maximum; 0 lists them all).
type NodeQuery struct {
	State NodeState
	After string
	Limit int
}

// RegisterResponse answers a node's registration.
type RegisterResponse struct {
	// Name is the registered node's name.
	Name string `json:"name"`
}

// NodeTarget is the set of pods the dispatcher wants on a node, or, when
// Base is set, how it changed since generation Base: Pods are the pods
// added (or changed) and Removed the task IDs of the pods dropped (which
// may name pods the node no longer has). A long-poll gets a difference
// only when it asks for one (diff=1) and the dispatcher still keeps the
// node's changes since generation Base; otherwise the whole target.
type NodeTarget struct {
	// Generation increases with every change of Pods but one: a pod
	// whose task the node itself reported ended leaves Pods without a new
	// generation (the node knows it ended, and is not woken to hear it);
	// a later difference lists it as removed.
	Generation uint64      `json:"generation"`
	Base       uint64      `json:"base,omitempty"`
	Pods       []TargetPod `json:"pods"`
	Removed    []string    `json:"removed,omitempty"`
}

// TargetPod is one pod of a node's target.
type TargetPod struct {
	// TaskID is the task (and attempt) the pod runs; reports name it.
	TaskID string `json:"task_id"`
	Job    string `json:"job"`
	// JobName is the job's name and Count its group's count (for a
	// capbox task, those of its capbox's job and group). A dispatcher
	// writes them only for a node that asks for them (identity=1, see
	// PathNode): the nodelets of the release before read targets strictly
	// and refuse members they do not know.
	JobName  string  `json:"job_name,omitempty"`
	Count    int64   `json:"count,omitempty"`
	Group    string  `json:"group"`
	QoS      QoS     `json:"qos"`
	Priority int32   `json:"priority"`
	Pod      PodSpec `json:"pod"`
	// MaxRunTime is the job's: the nodelet stops the pod that long after
	// it started and reports it killed (ReasonTimeLimit). Zero: no limit.
	MaxRunTime Duration `json:"max_run_time,omitzero"`
	// Capbox marks a capbox's placeholder: the pod holds the resources
	// of Pod's one container for its appmaster, and runs until stopped.
	Capbox bool `json:"capbox,omitempty"`
	// InCapbox is, for a task an appmaster runs in a capbox, the task ID
	// of that capbox's placeholder: the pod runs inside its resources.
	InCapbox string `json:"in_capbox,omitempty"`
	// Token is, for a pod of an appmaster job's own task groups (not a
	// capbox, nor a task in one), the job's token, which the node gives
	// the pod's containers as EnvToken: a credential for that job alone.
	// It is a secret, sent only in its node's target, and only to a node
	// that asks for the pods' identity (identity=1).
	Token string `json:"token,omitempty"`
	// Ports are the pod's ports as the dispatcher placed them, in the
	// order its containers list them: each with its number on the node
	// (static, or assigned from the node's range) and its protocol. Like
	// JobName, written only for a node that asks for the identity
	// (identity=1).
	Ports []Port `json:"ports,omitempty"`
}

// ReportRequest carries a node's task state changes, oldest first, and
// its usage. Delivery of reports is at least once: a repeated report is a
// no-op. A request with Usage is a heartbeat; it may carry no reports.
type ReportRequest struct {
	Reports []TaskReport `json:"reports"`
	// Usage, when set, is the node's usage now. The leader keeps the
	// latest in memory (NodeInfo.Usage); it is never in raft.
	Usage *NodeUsage `json:"usage,omitempty"`
}

// WatchEvent is one line of the watch stream: the state of a job after
// the raft entry at Index changed it. When the entry forgot the job
// (after its retention), the event carries its summary (Job.History); a
// job forgotten without a summary, or whose summary is dropped later,
// leaves the stream without an event.
type WatchEvent struct {
	Index uint64    `json:"index"`
	Job   JobStatus `json:"job"`
}
