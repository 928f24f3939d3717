package api

import "time"

// CapboxRequest asks for Count capboxes: resource slots on nodes that an
// appmaster leases and runs its own tasks in. Capboxes take the queue,
// priority and QoS class of the appmaster that asks for them.
type CapboxRequest struct {
	// Name identifies the request to people and in the appmaster's callbacks.
	Name string `json:"name"`
	// Count is the number of capboxes, 1 to MaxTaskCount.
	Count int64 `json:"count"`
	// Resources are what each capbox holds.
	Resources Resources `json:"resources"`
	// AllOrNothing places the Count capboxes together or not at all (a gang).
	AllOrNothing bool `json:"all_or_nothing,omitempty"`
	// Constraints are hard requirements on node labels.
	Constraints []Constraint `json:"constraints,omitempty"`
	// DistinctNodes puts every capbox of the request on a different node.
	DistinctNodes bool `json:"distinct_nodes,omitempty"`
	// PreferredNodes are nodes the capboxes would rather be on.
	PreferredNodes []string `json:"preferred_nodes,omitempty"`
	// IdempotencyKey makes a retried request safe, as for jobs.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// CapTaskSpec is a task an appmaster runs in one of its running capboxes:
// a pod on the capbox's node, inside the capbox's resources (the pods of a
// capbox's tasks that have not ended hold at most what the capbox holds).
// Its ID is the capbox's ID, "/", and its name.
type CapTaskSpec struct {
	// Capbox is the ID of the capbox to run in.
	Capbox string `json:"capbox"`
	// Name identifies the task within its capbox for the capbox's life:
	// starting a name again is answered with the task that has it.
	Name string `json:"name"`
	// Pod is what the task runs.
	Pod PodSpec `json:"pod"`
}

// CapTaskStatus is a capbox task as the dispatcher knows it. Its states
// are a task's from assigned on: assigned (sent to the node), starting,
// running, then succeeded, failed, killed (stopped by its appmaster, or
// its capbox released) or lost (its node went down). It is never retried.
type CapTaskStatus struct {
	ID       string     `json:"id"`
	Name     string     `json:"name"`
	State    TaskState  `json:"state"`
	Reason   TaskReason `json:"reason,omitempty"`
	ExitCode int32      `json:"exit_code,omitempty"`
	Updated  time.Time  `json:"updated"`
}

// StartCapTasksResponse answers a start: the tasks' IDs in order, and the
// indexes of those whose name was taken in their capbox (the existing
// task's ID is given; nothing new).
type StartCapTasksResponse struct {
	Tasks    []string `json:"tasks"`
	Existing []int    `json:"existing,omitempty"`
}

// StopCapTasksResponse answers a stop: the tasks told to stop (0 for
// those that had ended or were stopping).
type StopCapTasksResponse struct {
	Stopping int64 `json:"stopping"`
}

// CapboxStatus is one capbox as the dispatcher knows it.
type CapboxStatus struct {
	// ID names the capbox; its pod on the node runs under this task ID.
	ID string `json:"id"`
	// Set is the ID of the capbox set its request made; Request is the
	// request's name.
	Set     string      `json:"set"`
	Request string      `json:"request"`
	State   CapboxState `json:"state"`
	// Node is the node it is (or was) on; empty while pending.
	Node      string     `json:"node,omitempty"`
	Resources Resources  `json:"resources"`
	Reason    TaskReason `json:"reason,omitempty"`
	ExitCode  int32      `json:"exit_code,omitempty"`
	Updated   time.Time  `json:"updated"`
	// Tasks are the tasks the appmaster started in it, by name.
	Tasks []CapTaskStatus `json:"tasks,omitempty"`
}

// CapboxList is an appmaster's capboxes, by set and index.
type CapboxList struct {
	Capboxes []CapboxStatus `json:"capboxes"`
	// Index is a raft index the list is current as of: a watch from it
	// (Client.Watch) sees every later change of the appmaster's capbox
	// sets.
	Index uint64 `json:"index"`
}

// CreateCapboxesResponse answers a capbox request: one capbox set ID per
// request, in order, and the indexes of the requests whose idempotency
// key named a set created before (whose ID is given; nothing new).
type CreateCapboxesResponse struct {
	Sets     []string `json:"sets"`
	Existing []int    `json:"existing,omitempty"`
}

// ReleaseCapboxesResponse answers a release: the pending capboxes dropped
// and the active ones told to stop (0 for those released before).
type ReleaseCapboxesResponse struct {
	Dropped  int64 `json:"dropped"`
	Stopping int64 `json:"stopping"`
}
