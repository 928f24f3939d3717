package api

import (
	"errors"
	"fmt"
)

// QueueCaps are a queue's hard caps: the most its active tasks (assigned,
// starting or running) may hold in all, both tiers summed. Placement never
// assigns a task that would take a queue past any of them; tasks held back
// stay pending with the reason "queue NAME over its DIM quota". A zero
// field is no cap. Lowering a cap below what the queue holds stops nothing:
// the queue gets no new tasks until it is back under.
type QueueCaps struct {
	// CPU in millicores.
	CPU int64 `json:"cpu,omitempty"`
	// Memory in bytes.
	Memory int64 `json:"memory,omitempty"`
	// GPUs is a number of whole GPUs.
	GPUs int64 `json:"gpus,omitempty"`
	// Tasks is a number of active tasks.
	Tasks int64 `json:"tasks,omitempty"`
}

// Capped reports whether any cap is set.
func (c QueueCaps) Capped() bool { return c != QueueCaps{} }

// QueueSettings are what an admin sets on a queue (PUT PathQueue + name);
// they are replicated, and apply from the next scheduling round.
type QueueSettings struct {
	// Weight is the queue's fair-share weight, 1 to MaxQueueWeight; 0
	// leaves it to the dispatcher's configured weights (default 1).
	Weight int64     `json:"weight,omitempty"`
	Caps   QueueCaps `json:"caps"`
}

// Validate reports every problem of s, by field path.
func (s *QueueSettings) Validate() error {
	var errs []error
	if s.Weight < 0 || s.Weight > MaxQueueWeight {
		errs = append(errs, fmt.Errorf("weight: %d not in 0..%d", s.Weight, MaxQueueWeight))
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"caps.cpu", s.Caps.CPU}, {"caps.memory", s.Caps.Memory}, {"caps.gpus", s.Caps.GPUs}, {"caps.tasks", s.Caps.Tasks}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %d is negative (0 is no cap)", f.name, f.v))
		}
	}
	return errors.Join(errs...)
}

// QueueStatus is a queue as GET PathQueues lists it: its settings, what
// its active tasks hold and how many tasks it has pending.
type QueueStatus struct {
	Name string `json:"name"`
	QueueSettings
	// EffectiveWeight is the weight rounds give the queue: its settings',
	// else the dispatcher's configured one, else 1.
	EffectiveWeight int64 `json:"effective_weight"`
	// Running is what the queue's active tasks hold, both tiers summed;
	// Tasks how many they are.
	Running Capacity `json:"running"`
	Tasks   int64    `json:"tasks"`
	// Pending counts the queue's tasks waiting for placement.
	Pending int64 `json:"pending"`
}

// QueueList answers GET PathQueues: every queue with settings, active or
// pending tasks, by name.
type QueueList struct {
	Queues []QueueStatus `json:"queues"`
}
