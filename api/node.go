package api

import "time"

// NodeState is whether a node takes new work.
type NodeState string

// Node states.
const (
	// NodeReady nodes take new work.
	NodeReady NodeState = "ready"
	// NodeDraining nodes keep running what they have and take nothing new.
	NodeDraining NodeState = "draining"
	// NodeDown nodes missed their heartbeat deadline; their tasks are lost
	// and retried elsewhere.
	NodeDown NodeState = "down"
)

// Capacity is an amount of every resource dimension a node has.
type Capacity struct {
	// CPU in millicores.
	CPU int64 `json:"cpu"`
	// Memory in bytes.
	Memory int64 `json:"memory"`
	// GPUs is the number of whole GPUs.
	GPUs int64 `json:"gpus,omitempty"`
	// Disk in bytes.
	Disk int64 `json:"disk,omitempty"`
	// Ports is the number of ports the node can hand out.
	Ports int64 `json:"ports,omitempty"`
}

// Allocatable splits what a node offers between the two QoS tiers. Online is
// guaranteed; Offline is what offline work may be allocated in total, which
// may exceed what online leaves free (overcommit), since offline work borrows
// what online work leaves idle.
type Allocatable struct {
	Online  Capacity `json:"online"`
	Offline Capacity `json:"offline"`
}

// Plus returns c plus k times d in every dimension (k may be negative).
func (c Capacity) Plus(d Capacity, k int64) Capacity {
	c.CPU += k * d.CPU
	c.Memory += k * d.Memory
	c.GPUs += k * d.GPUs
	c.Disk += k * d.Disk
	c.Ports += k * d.Ports
	return c
}

// AddTier adds k times d to the tier that work of class q draws on.
func (a *Allocatable) AddTier(q QoS, d Capacity, k int64) {
	if q == QoSOnline {
		a.Online = a.Online.Plus(d, k)
	} else {
		a.Offline = a.Offline.Plus(d, k)
	}
}

// NodeSpec is what a nodelet advertises when it joins.
type NodeSpec struct {
	// Name identifies the node in the cluster; it is unique.
	Name string `json:"name"`
	// Address is where the nodelet serves logs, host:port.
	Address string `json:"address,omitempty"`
	// Pool is the node's pool. Empty is the default pool.
	Pool string `json:"pool,omitempty"`
	// Labels are matched by job constraints.
	Labels map[string]string `json:"labels,omitempty"`
	// Capacity is what the host has.
	Capacity Capacity `json:"capacity"`
	// Allocatable is what the host offers to each tier.
	Allocatable Allocatable `json:"allocatable"`
}

// Usage is what a node, tier or pod uses right now.
type Usage struct {
	// CPU in millicores, averaged over the last sample period.
	CPU int64 `json:"cpu"`
	// Memory in bytes (resident, without page cache).
	Memory int64 `json:"memory"`
}

// NodeUsage is a node's usage, in total and per tier, and per running
// task for the dispatcher's usage estimates.
type NodeUsage struct {
	Total   Usage       `json:"total"`
	Online  Usage       `json:"online"`
	Offline Usage       `json:"offline"`
	Tasks   []TaskUsage `json:"tasks,omitempty"`
}

// TaskUsage is one running task's usage on its node.
type TaskUsage struct {
	TaskID string `json:"task_id"`
	// QoS is the tier the task runs in.
	QoS QoS `json:"qos"`
	Usage
}

// NodeStatus is what the dispatcher knows of a node.
type NodeStatus struct {
	Spec  NodeSpec  `json:"spec"`
	State NodeState `json:"state"`
	// Usage is from the node's last heartbeat.
	Usage NodeUsage `json:"usage"`
	// LastHeartbeat is when the dispatcher last heard from the node.
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
	// Generation is the newest target generation the node acknowledged.
	Generation uint64 `json:"generation"`
}

// TaskReason says why a task changed state, for reports and people.
type TaskReason string

// Reasons a nodelet gives in its task reports.
const (
	ReasonStarted      TaskReason = "started"       // the pod is running
	ReasonExited       TaskReason = "exited"        // the pod exited on its own; see ExitCode
	ReasonOOMKilled    TaskReason = "oom_killed"    // the kernel killed it at its memory limit
	ReasonMemoryKiller TaskReason = "memory_killer" // the nodelet killed it to free host memory
	ReasonStartFailed  TaskReason = "start_failed"  // the pod could not be started; see Message
	ReasonStopped      TaskReason = "stopped"       // stopped because the dispatcher no longer wants it
	ReasonTimeLimit    TaskReason = "time_limit"    // ran longer than its job's MaxRunTime
	ReasonLost         TaskReason = "lost"          // the nodelet lost track of it
)

// ReasonPreempted is the reason the dispatcher records for a task it
// stopped to make room for higher-priority work; nodes do not report it.
const ReasonPreempted TaskReason = "preempted"

// TaskReport is a change of a task's state, as a nodelet reports it.
type TaskReport struct {
	// TaskID is the dispatcher's ID of the task.
	TaskID string `json:"task_id"`
	// State is the state the task moved to.
	State TaskState `json:"state"`
	// Reason says why.
	Reason TaskReason `json:"reason"`
	// ExitCode is the pod's exit code when it exited.
	ExitCode int32 `json:"exit_code,omitempty"`
	// Message is detail for people, such as a start error.
	Message string `json:"message,omitempty"`
	// Time is when the nodelet saw the change.
	Time time.Time `json:"time"`
	// Usage is the pod's usage at the time of the report.
	Usage Usage `json:"usage,omitzero"`
}
