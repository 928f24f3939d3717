// Package dispatcher is the dispatcher's runtime on one raft replica: the
// scheduling loop that turns committed pending tasks into committed
// placements while the replica leads, the node registry (heartbeats held in
// the leader's memory, TTLs, batched task reports) and the node-facing
// Target long-poll. The state lives in package fsm (the only writer);
// package placement decides where tasks go. HTTP comes on top of the Go API
// here.
//
// # The scheduling loop: a core and its shell
//
// The loop is split in two, in the shape of etcd raft's RawNode. Package
// sched holds the core: a synchronous state machine with no goroutine, no
// clock and no I/O, fed events (the replica's leadership and term, work
// arrived, the time, an action finished) and answering with actions (start
// or stop leading, a barrier, grace beats, a round, a preemption, a
// liveness check, a forget pass) and the time it wants to be woken at. Its
// scripts (sched/testdata) pin the policy. The shell (shell.go) is one
// goroutine that owns the core: it learns of leadership from
// raftkv.Node.LeadershipChanged (pushed, not polled), of work from kick
// (Submit counts its tasks), of time from one Clock timer armed at the
// core's Wake, and it carries out the actions, those that wait on raft in
// goroutines of the term that report back. Stopping leading cancels the
// term's context and waits for them.
//
// A term starts with a ReadIndex barrier (retried every 20ms), so that it
// sees everything earlier leaders committed, then grace beats. Rounds are
// formed by a batcher inside the core: every task that arrives (a submit
// counts its tasks; a registration, reports, a node state change count 1)
// is an item; a round closes when MaxTasks items wait (the size bound) or
// the oldest has waited MaxWait (the wait bound), and at the latest Period
// after the last round. One round runs at a time; what arrives meanwhile
// waits for it. A round that asks for another (it placed and left work,
// its budget ran out, assignments were rejected, it preempted) is requeued
// with a backoff of MaxWait: always while it places, IdleRounds (3) times
// in a row while it does not. Each round:
//
//  1. reads the round's input (roundinput.Kept.Read, at most MaxTasks
//     tasks) into the last round's input,
//     kept and read again only for the nodes the FSM's change sets named
//     since, and the applied index;
//  2. runs placement under the RoundBudget (a solve cut short leaves the
//     work pending);
//  3. proposes ONE fsm.CommitPlan carrying the term and that index, and
//     decodes the result. Assignments the FSM rejects as stale simply stay
//     pending in the FSM and are retried by the next round; a plan refused
//     as a deposed leader's (fsm.ErrStalePlan) stops the term's rounds
//     (housekeeping goes on until the leadership changes);
//  4. then, as an action of its own, if the plan left offline groups above
//     priority 0 pending for lack of capacity, reads the state again with
//     the running offline tasks of a lower priority (roundinput.AddVictims), lets placement.Preempt choose at most
//     MaxPreemptions of them, and proposes them in one fsm.PreemptTasks. The
//     victims leave their nodes' targets; once the nodes report them
//     stopped, a later round places the waiting groups in the room, and the
//     victims are requeued (reason "preempted").
//
// Beside the rounds, the leader forgets finished jobs: every quarter of
// JobRetention (at most every 10s) it proposes fsm.ForgetJobs for the jobs
// that finished JobRetention ago or earlier (fsm.Forgettable, MaxForget a
// command), so that every replica's state follows the work in flight and
// the retention, not every job ever run. With a history (HistoryRetention
// and HistoryMax, on by default) the command is fsm.ForgetJobsToHistory,
// and each job forgotten leaves a summary that listings show; the same
// pass, then every second, proposes fsm.PruneHistory for the summaries of
// jobs that ended HistoryRetention ago or earlier and the oldest beyond
// HistoryMax (fsm.HistoryPrunable).
//
// Per-round stats (latency, the solver's share, placed, rejected) are kept
// in a ring: Rounds, RoundSummary. Diagnosis returns placement's reasons
// for what the last round left pending.
//
// # Nodes
//
// Register proposes fsm.RegisterNode. Report records a contact and adds
// the call to a batcher (package batcher), which forms rounds of the calls
// of many nodes: a round closes when MaxReports calls wait or the oldest
// has waited ReportWait, and is committed as fsm.UpdateTasks commands of at
// most MaxReports reports, in order, up to four rounds in flight. The start
// of a Target long-poll counts as contact too (the leader answers a poll,
// unchanged, within half the node's TTL, so a live node polls again in
// time, and an open poll of a node cut off does not keep it alive), and so
// does a Heartbeat, which also carries the node's usage (kept in memory
// by the leader of the term, never proposed). The
// leader checks every LivenessEvery: a node without contact for its TTL
// (NodeTTL + NodeTTLPerNode × nodes) is proposed down (its tasks end lost
// and are retried by the FSM), and a down node heard from again is
// proposed ready (the FSM keeps a drained one draining). Only transitions
// are proposed. A new leader gives every node a full TTL of grace.
//
// # Drains
//
// An operator drains a node (DrainNode, fsm.DrainNode): it leaves the
// rounds' input at once. Its deadline, an absolute time in the command,
// is enforced by the same check: a drained node that is not down, has
// active tasks and whose deadline passed by the dispatcher's Clock is
// proposed fsm.EndDrain, whose apply stops and requeues its tasks on every
// replica alike; so a deadline takes effect within LivenessEvery of
// passing. UndrainNode ends a drain; RemoveNode forgets a drained or down
// node without active tasks.
//
// # Cached slots
//
// With SlotTTL set, the report batcher's commands keep the resources of
// each task that ends on its own cached on its node for SlotTTL (Capos'
// offer cache): placement prefers them for tasks of the same shape and
// class (the slot_reuse scorer), other work cannot take them, and they
// return to the free pool when the TTL ends.
//
// # Usage estimates
//
// Heartbeats carry each running task's usage. The leader keeps, per task
// group (Hippo's app+role), an estimate of one task's usage that a larger
// sample raises at once and smaller ones lower a fifth of the way every
// EstimateDecayEvery (the nodes' heartbeat period), however many of its
// tasks report; it is
// in memory only, like the heartbeats, and a new leader starts without.
// Each round lowers a node's free offline capacity to what its online work
// leaves idle by the estimates: its online capacity less its reported
// online tasks' estimates (plus EstimateHeadroom), less what online tasks
// placed since ask for, less what offline tasks hold — never above the
// node's static offline allocatable, which the FSM enforces. Nodes without
// a heartbeat younger than EstimateMaxAge keep the static capacity.
//
// A Target long-poll wakes when its node's target generation changes (the
// Dispatcher subscribes to the FSM's change sets and, at each completion
// of raft entries, wakes the polls of the nodes they changed) or the
// replica's leadership changes; an apply wakes no other poll. TargetChanges
// answers with the changes since the node's known target when its target
// journal (targets.go) still keeps them, so a change costs in proportion
// to itself, not to the pods on the node. The node-facing types are this
// package's Target and the api's (TargetPod, TaskReport), which the FSM answers in,
// so that the HTTP layer sends its pods as they are: the dispatcher may not
// import nodelet, so an adapter to nodelet.Dispatcher lives with whoever
// wires them (tests, the HTTP layer).
//
// # Views of the FSM's change sets
//
// The FSM owns the replicated state and publishes, after each command it
// applied, the command's change set (fsm.Changes: the jobs, groups, tasks,
// capbox sets and node targets it touched, at its index), a completion
// when every command of the raft entries up to an index is applied, and a
// reset when a Load replaced its state. New subscribes (fsm.FSM.Subscribe)
// and Close ends the subscription. The views derive what their readers
// need from the change sets, each under its own lock, and read the FSM's
// state (under its read lock) for the rest:
//
//   - the round input (package roundinput): the scheduling loop's, read
//     again only for the nodes changed since the last round;
//   - the watch feed (package jobfeed): the jobs in the order of their
//     last change, for the HTTP watch (JobsChangedSince);
//   - the target journals (targets.go): each node's changes of its target
//     by generation, from the change sets' target changes
//     (fsm.TargetChange), answered with the pods the FSM reads for them
//     (fsm.FSM.NodeTargetChanges) and labelled with the generation the
//     journal covers, not the FSM's newer one, so that a change not yet
//     consumed is sent at the next poll; a whole target is read from the
//     FSM with its generation at once;
//   - the wake-ups (wakeups.go): the Changed waiters wake at each
//     completion, and a node's Target long-polls at the completion after
//     a command moved its target generation; nothing polls the FSM.
//
// The change sets reach the views on the replica's apply goroutine, in
// order, the wake-ups last, so that a reader woken by a change finds the
// other views as new as that change. A view may be behind the
// FSM (it consumes a change set after the FSM's lock is released) but
// never ahead; an answer that reads the FSM's state for what a view named
// is cut where the FSM is found ahead of the view (jobfeed) or labelled
// with what the view covers (the target journals), so that a reader
// resuming from the answer's index or generation misses nothing. A reset
// voids what a view derived: it reads the FSM's state again, or starts
// afresh (the target journals: each node gets its whole target once).
//
// # Invariants
//
//   - Only the leader's loop proposes plans, and only with its own term;
//     the FSM refuses a deposed leader's plans, so two loops cannot both
//     place.
//   - Every goroutine is started by New (or by the leadership watcher,
//     which waits for the loop it started) and stops on Close.
//   - Errors of the raft replica from Submit, Register, Cancel and Report
//     are returned unchanged (a *raftkv.NotLeaderError names the leader).
//
// # Usage
//
//	f := fsm.New()
//	kv, err := raftkv.Open(raftkv.Config{ID: 1, Dir: dir, StateMachine: f})
//	d, err := dispatcher.New(dispatcher.Config{Raft: kv, FSM: f})
//	defer d.Close()
//	err = d.Register(ctx, nodeSpec)
//	ids, _, err := d.Submit(ctx, specs)
//	t, err := d.Target(ctx, "node-1", 0)     // long-poll
//	err = d.Report(ctx, "node-1", reports) // task state changes
package dispatcher
