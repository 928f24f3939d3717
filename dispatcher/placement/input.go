package placement

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/api"
)

// ErrBadInput is wrapped by every error about an input Place cannot use.
var ErrBadInput = errors.New("placement: bad input")

// Node is a cluster node as a round sees it.
type Node struct {
	// ID names the node; unique in the input.
	ID   string
	Rack string
	Pool string
	// Labels are matched by constraints.
	Labels map[string]string
	// Capacity is what the node's tiers offer in all (for load scores).
	Capacity api.Allocatable
	// Free is what is left of each tier's allocatable after the work the
	// node already runs or has been assigned.
	Free api.Allocatable
	// Slots are resources cached on the node by finished tasks, kept for a
	// task of the same shape (Capos' offer cache). They are not in Free.
	Slots []Slot
	// Jobs lists the jobs with a task on the node, for distinct-node jobs.
	Jobs map[string]bool
	// Releasing is what of the node's used resources tasks already told to
	// stop (cancelled, preempted) hold: free once they end. Place does not
	// count it as free; Preempt does, so as not to stop more for the same
	// room.
	Releasing api.Allocatable
	// Victims are the node's running offline tasks that Preempt may stop;
	// Place ignores them, and they may be left out when no preemption is
	// wanted.
	Victims []Victim
	// PortRange is the range the node assigns dynamic ports from; a node
	// without one takes no task that asks for ports. How many of its
	// ports are free for dynamic assignment is in Free (Ports, the same
	// in both tiers: ports are the node's, not a tier's).
	PortRange api.PortRange
	// PortsInUse are the ports the node's active tasks hold (static and
	// assigned), sorted; a task's static ports must not be among them.
	PortsInUse []api.PortKey
}

// Slot is a cached resource slot.
type Slot struct {
	ID  string
	QoS api.QoS
	// Shape is the per-task demand the slot was cut for.
	Shape api.Capacity
}

// GroupKey names a task group.
type GroupKey struct {
	Job   string
	Group string
}

func (k GroupKey) String() string { return k.Job + "/" + k.Group }

// Group is a task group's pending tasks.
type Group struct {
	Key GroupKey
	// Pending is how many of the group's tasks are to be placed.
	Pending int64
	// Demand is what one task needs (the sum of its pod's containers;
	// Ports counts its dynamic ports).
	Demand api.Capacity
	// StaticPorts are the ports one task needs by number, sorted
	// (StaticPorts): a node holds at most one task of the group, and only
	// where all of them are free.
	StaticPorts []api.PortKey
	QoS         api.QoS
	Priority    int32
	Queue       string
	Pool        string
	// Constraints are hard requirements on node labels.
	Constraints []api.Constraint
	// DistinctNodes allows at most one task of the job per node.
	DistinctNodes bool
	// Gang places the group's Pending tasks all in this round or none.
	Gang bool
	// Preferred are nodes the tasks would rather run on.
	Preferred []string
	// Policy chooses filters and scorers; nil means the Registry's default.
	Policy *api.Policy
	// Waited is how long the group's oldest pending task has waited.
	Waited time.Duration
	// JobRunning is what the active tasks of the group's job hold, both
	// tiers summed (the same for every group of a job), for fairness
	// between the jobs of a queue.
	JobRunning api.Capacity
}

// Queue is a fair-share queue as a round sees it.
type Queue struct {
	Name string
	// Weight is the queue's share of the cluster relative to the other
	// active queues' (those with running or pending tasks); 0 means 1.
	Weight int64
	// Running is what the queue's active tasks hold, both tiers summed;
	// Tasks is how many they are.
	Running api.Capacity
	Tasks   int64
	// Caps bound what the queue's active tasks may hold once the round's
	// assignments are made (zero: none). A round never assigns a task
	// that would take Running or Tasks past a cap; what it holds back
	// stays pending with the reason QuotaReason gives.
	Caps api.QueueCaps
}

// Input is one round: the cluster and the groups to place.
type Input struct {
	Nodes  []Node
	Groups []Group
	// Queues lists the queues with running tasks, and may list others
	// (for their weights and caps). A group's queue missing here runs
	// nothing, weighs 1 and has no caps.
	Queues []Queue
	// Kept says that Nodes are those of the input the Placer was last
	// given, in the same order and unchanged but at the positions in
	// Changed (a position may be listed more than once). A Placer then
	// filters and scores again, for a class it saw in its last round,
	// only the changed nodes. The caller must list every change: the
	// dispatcher's kept round input (roundinput.Kept) does, and so does its
	// offline estimate, which lowers nodes' free resources in place.
	Kept    bool
	Changed []int32
}

// validate reports every problem of in, by index.
//
// With keptValid, in is Kept and the Placer's last input, of the same
// nodes, was valid: only the changed nodes' amounts are checked (their IDs
// are as they were).
func (in *Input) validate(reg *Registry, keptValid bool) error {
	var errs []error
	if keptValid {
		for _, i := range in.Changed {
			if int(i) >= 0 && int(i) < len(in.Nodes) {
				errs = checkAmounts(errs, int(i), &in.Nodes[i])
			}
		}
	} else {
		// Nodes in strictly increasing ID order (as the FSM lists them)
		// cannot repeat one; only others need a set of the IDs seen.
		var ids map[string]bool
		if !idsIncreasing(in.Nodes) {
			ids = make(map[string]bool, len(in.Nodes))
		}
		for i := range in.Nodes {
			n := &in.Nodes[i]
			switch {
			case n.ID == "":
				errs = append(errs, fmt.Errorf("nodes[%d].id: empty", i))
			case ids[n.ID]:
				errs = append(errs, fmt.Errorf("nodes[%d].id: %q appears twice", i, n.ID))
			}
			if ids != nil {
				ids[n.ID] = true
			}
			errs = checkAmounts(errs, i, n)
		}
	}
	for i, k := range in.Changed {
		if k < 0 || int(k) >= len(in.Nodes) {
			errs = append(errs, fmt.Errorf("changed[%d]: %d is not a position in nodes (%d)", i, k, len(in.Nodes)))
		}
	}
	queues := make(map[string]bool, len(in.Queues))
	for i, q := range in.Queues {
		switch {
		case queues[q.Name]:
			errs = append(errs, fmt.Errorf("queues[%d].name: %q appears twice", i, q.Name))
		case q.Weight < 0 || q.Weight > api.MaxQueueWeight:
			errs = append(errs, fmt.Errorf("queues[%d].weight: %d not in 0..%d", i, q.Weight, api.MaxQueueWeight))
		case negative(q.Running) || q.Tasks < 0:
			errs = append(errs, fmt.Errorf("queues[%d].running: negative amount %+v, %d tasks", i, q.Running, q.Tasks))
		case q.Caps.CPU < 0 || q.Caps.Memory < 0 || q.Caps.GPUs < 0 || q.Caps.Tasks < 0:
			errs = append(errs, fmt.Errorf("queues[%d].caps: negative cap %+v", i, q.Caps))
		}
		queues[q.Name] = true
	}
	groups := make(map[GroupKey]bool, len(in.Groups))
	for i, g := range in.Groups {
		if g.Key.Job == "" || g.Key.Group == "" {
			errs = append(errs, fmt.Errorf("groups[%d].key: job and group must be set", i))
		} else if groups[g.Key] {
			errs = append(errs, fmt.Errorf("groups[%d].key: %s appears twice", i, g.Key))
		}
		groups[g.Key] = true
		if g.Pending < 0 || g.Pending > api.MaxTaskCount {
			errs = append(errs, fmt.Errorf("groups[%d].pending: %d not in 0..%d", i, g.Pending, api.MaxTaskCount))
		}
		if negative(g.Demand) || g.Demand.CPU <= 0 || g.Demand.Memory <= 0 {
			errs = append(errs, fmt.Errorf("groups[%d].demand: %+v: CPU and memory must be positive, nothing negative", i, g.Demand))
		}
		if g.QoS != api.QoSOnline && g.QoS != api.QoSOffline {
			errs = append(errs, fmt.Errorf("groups[%d].qos: %q is not online or offline", i, g.QoS))
		}
		if g.Priority < 0 || g.Priority > api.MaxPriority {
			errs = append(errs, fmt.Errorf("groups[%d].priority: %d not in 0..%d", i, g.Priority, api.MaxPriority))
		}
		if err := reg.check(g.Policy); err != nil {
			errs = append(errs, fmt.Errorf("groups[%d].policy: %w", i, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrBadInput, errors.Join(errs...))
	}
	return nil
}

// checkAmounts appends to errs an error for each negative amount of n, the
// input's node i.
func checkAmounts(errs []error, i int, n *Node) []error {
	if !negativeTier(n.Free) && !negativeTier(n.Capacity) && !negativeTier(n.Releasing) {
		return errs
	}
	for _, c := range []struct {
		name string
		v    api.Capacity
	}{{"free.online", n.Free.Online}, {"free.offline", n.Free.Offline}, {"capacity.online", n.Capacity.Online}, {"capacity.offline", n.Capacity.Offline},
		{"releasing.online", n.Releasing.Online}, {"releasing.offline", n.Releasing.Offline}} {
		if negative(c.v) {
			errs = append(errs, fmt.Errorf("nodes[%d].%s: negative amount %+v", i, c.name, c.v))
		}
	}
	return errs
}

// idsIncreasing reports whether ns's IDs are in strictly increasing order.
func idsIncreasing(ns []Node) bool {
	for i := 1; i < len(ns); i++ {
		if ns[i-1].ID >= ns[i].ID {
			return false
		}
	}
	return true
}

// negativeTier reports whether either tier of a has a negative amount.
func negativeTier(a api.Allocatable) bool { return negative(a.Online) || negative(a.Offline) }

func negative(c api.Capacity) bool {
	return c.CPU < 0 || c.Memory < 0 || c.GPUs < 0 || c.Disk < 0 || c.Ports < 0
}

// pool returns the tier of a node that work of class q draws on.
func pool(a api.Allocatable, q api.QoS) api.Capacity {
	if q == api.QoSOnline {
		return a.Online
	}
	return a.Offline
}

// fits returns how many tasks of demand d fit in free (d has positive CPU
// and memory, so the answer is finite).
func fits(free, d api.Capacity) int64 {
	n := free.CPU / d.CPU
	n = min(n, free.Memory/d.Memory)
	if d.GPUs > 0 {
		n = min(n, free.GPUs/d.GPUs)
	}
	if d.Disk > 0 {
		n = min(n, free.Disk/d.Disk)
	}
	if d.Ports > 0 {
		n = min(n, free.Ports/d.Ports)
	}
	return max(n, 0)
}
