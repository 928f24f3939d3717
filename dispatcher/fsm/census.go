package fsm

import (
	"cmp"
	"slices"

	"github.com/sluicehq/sluice/api"
)

// NumJobStates is the number of job states: JobState values are below it.
const NumJobStates = int(JobCancelled) + 1

// QueueTasks counts the tasks of one queue and QoS class.
type QueueTasks struct {
	Queue string
	QoS   api.QoS
	// Pending are waiting for placement (never placed, or waiting for a
	// retry); Active are assigned, starting or running on a node.
	Pending, Active int64
}

// Census counts the jobs the FSM holds by state and their tasks by queue
// and class.
type Census struct {
	// Jobs counts the jobs (capbox sets included) by state, indexed by
	// JobState.
	Jobs [NumJobStates]int64
	// Queues has one entry for each queue and class of a job the FSM
	// holds, sorted by queue then class.
	Queues []QueueTasks
}

// Census counts the jobs and tasks the FSM holds. It reads the jobs in
// chunks (walkJobs), letting apply run in between, as QueueCounts does: its counts are of a moment per chunk, and a scrape of a large
// cluster does not hold applies back for a whole walk.
func (f *FSM) Census() Census { return f.census(queueCountChunk) }

// census is Census reading chunk jobs under each hold of the lock.
func (f *FSM) census(chunk int) Census {
	type qk struct {
		queue string
		qos   api.QoS
	}
	var c Census
	byQueue := map[qk]*QueueTasks{}
	f.walkJobs(chunk, func(j *job) {
		c.Jobs[j.state()]++
		k := qk{j.queue, j.qos}
		q := byQueue[k]
		if q == nil {
			q = &QueueTasks{Queue: j.queue, QoS: j.qos}
			byQueue[k] = q
		}
		for _, g := range j.groups {
			// A cancelled job's tasks wait for nothing; its active tasks
			// still hold their nodes until they stop.
			if !j.cancelled {
				q.Pending += g.pending()
			}
			q.Active += g.active
		}
	}, nil)
	c.Queues = make([]QueueTasks, 0, len(byQueue))
	for _, q := range byQueue {
		c.Queues = append(c.Queues, *q)
	}
	slices.SortFunc(c.Queues, func(a, b QueueTasks) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.QoS, b.QoS))
	})
	return c
}
