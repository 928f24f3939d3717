package api

import "time"

// Paths of the cluster's summary, the caller's identity and the web UI.
const (
	// PathCluster: GET answers a ClusterStatus (reader role): the
	// replica's view of raft, the nodes' totals, the jobs and tasks of
	// every queue, and the recent scheduling rounds.
	PathCluster = "/v1/cluster"
	// PathWhoami: GET answers a Whoami: the role and scope of the
	// request's token, so that a client can offer only what it may do.
	PathWhoami = "/v1/whoami"
	// PathUI is the web UI's root. Its pages and assets are public and
	// hold no data: the pages' scripts read the API with the token the
	// user gives them.
	PathUI = "/ui/"
)

// ClusterStatus is a replica's summary of the cluster.
type ClusterStatus struct {
	// Replica is the raft ID of the replica that answered, Leader the
	// leader it knows (0: none), Term its term, Applied the index its
	// state is current as of.
	Replica  uint64 `json:"replica"`
	Leader   uint64 `json:"leader"`
	IsLeader bool   `json:"is_leader"`
	Term     uint64 `json:"term"`
	Applied  uint64 `json:"applied"`
	// Queues are the queues that hold a job or have a weight, by name
	// ("" is the default queue).
	Queues []QueueSummary `json:"queues"`
	// Tasks sums the queues' tasks.
	Tasks TaskCounts `json:"tasks"`
	// Jobs counts the jobs by state, over every queue.
	Jobs map[JobState]int64 `json:"jobs"`
	// Rounds are the recent scheduling rounds that had pending work,
	// oldest first. Only the leader schedules: a follower's list is what
	// it recorded while it led, if it did.
	Rounds []RoundInfo `json:"rounds"`
	// RoundTotals count every round since the replica started.
	RoundTotals RoundTotals `json:"round_totals"`
	// Nodes sums the registered nodes.
	Nodes NodeTotals `json:"nodes"`
}

// NodeTotals sums the registered nodes: how many are in each state, what
// they may allocate and what their active tasks hold, per tier, and, on
// the leader, what the nodes said they use.
type NodeTotals struct {
	// States counts the nodes by state; Total is their sum.
	States map[NodeState]int64 `json:"states"`
	Total  int64               `json:"total"`
	// Allocatable and Used sum the nodes' (NodeInfo.Spec.Allocatable,
	// NodeInfo.Used).
	Allocatable Allocatable `json:"allocatable"`
	Used        Allocatable `json:"used"`
	// Usage sums the last usage of the UsageNodes nodes whose heartbeats
	// the leader holds (NodeInfo.Usage, without its tasks and
	// overcommit). Nil on a follower, or when no node sent usage.
	Usage      *NodeUsage `json:"usage,omitempty"`
	UsageNodes int64      `json:"usage_nodes"`
}

// QueueSummary is one queue in the cluster summary: its fair-share
// weight and what it holds.
type QueueSummary struct {
	Name   string             `json:"name"`
	Weight int64              `json:"weight"`
	Jobs   map[JobState]int64 `json:"jobs"`
	Tasks  TaskCounts         `json:"tasks"`
	// Used is what its active tasks hold, both tiers together.
	Used Capacity `json:"used"`
}

// RoundInfo is one scheduling round. Durations are in seconds.
type RoundInfo struct {
	At   time.Time `json:"at"`
	Term uint64    `json:"term"`
	// Tasks and Groups are the pending work it considered, Nodes the
	// ready nodes.
	Tasks  int64 `json:"tasks"`
	Groups int   `json:"groups"`
	Nodes  int   `json:"nodes"`
	// Placed were committed, Rejected refused by the state machine as
	// stale, Unplaced left pending, Preempted running tasks it stopped.
	Placed    int64 `json:"placed"`
	Rejected  int64 `json:"rejected"`
	Unplaced  int64 `json:"unplaced"`
	Preempted int64 `json:"preempted"`
	// FlowNodes and FlowArcs are its flow network's size, Cost its flow's
	// cost; Optimal is false when the solver stopped at the deadline.
	FlowNodes int   `json:"flow_nodes"`
	FlowArcs  int   `json:"flow_arcs"`
	Cost      int64 `json:"cost"`
	Optimal   bool  `json:"optimal"`
	// Latency is the whole round; Build and Solve are placement's, Commit
	// the raft proposal's.
	Latency float64 `json:"latency"`
	Build   float64 `json:"build"`
	Solve   float64 `json:"solve"`
	Commit  float64 `json:"commit"`
	Err     string  `json:"error,omitempty"`
}

// RoundTotals count rounds and their placements.
type RoundTotals struct {
	Rounds    int64 `json:"rounds"`
	Placed    int64 `json:"placed"`
	Rejected  int64 `json:"rejected"`
	Preempted int64 `json:"preempted"`
}

// Whoami is who a request's token acts as.
type Whoami struct {
	// Role is reader, submitter, nodelet, admin or job.
	Role string `json:"role"`
	// Queues limit a submitter to these queues (none: every queue).
	Queues []string `json:"queues,omitempty"`
	// Node is a nodelet's node, Job a job token's job.
	Node string `json:"node,omitempty"`
	Job  string `json:"job,omitempty"`
	// Auth is false when the server checks no token: every request acts
	// as admin.
	Auth bool `json:"auth"`
}

// NodeDetail is one node and the pods its target holds
// (GET PathNode + "{name}").
type NodeDetail struct {
	NodeInfo
	Pods []NodePod `json:"pods"`
}

// NodePod is one pod of a node's target, with its task's state.
type NodePod struct {
	TaskID string    `json:"task_id"`
	Job    string    `json:"job"`
	Group  string    `json:"group"`
	QoS    QoS       `json:"qos"`
	State  TaskState `json:"state,omitempty"`
	// Resources sum the pod's containers'.
	Resources Resources `json:"resources"`
	// Capbox marks a capbox's placeholder; InCapbox is, for a task an
	// appmaster runs in a capbox, that capbox's task ID.
	Capbox   bool   `json:"capbox,omitempty"`
	InCapbox string `json:"in_capbox,omitempty"`
}
