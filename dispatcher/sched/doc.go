// Package sched is the dispatcher's scheduling core: a synchronous state
// machine, in the shape of etcd raft's RawNode, that decides when the
// leader runs a scheduling round and its housekeeping. It takes events
// (leadership, work arrived, time passed, an action finished) and answers
// with actions (run a round, preempt, check liveness, forget, start or stop
// leading) and the time by which it wants to hear from its caller again.
//
// The Core starts no goroutine, reads no clock and does no I/O: every
// event carries the time, and the caller (the dispatcher's shell) reads
// the state, places, proposes, and feeds the results back. A batcher
// forms the rounds: each unit of work arrived is an item, a round closes
// when MaxTasks items are waiting (the size bound) or when the oldest has
// waited MaxWait (the wait bound), and a round worth repeating is requeued
// with a backoff of MaxWait. The batcher decides when; placement decides
// what, from the replicated state.
//
// The Core is not safe for concurrent use: one goroutine owns it.
package sched
