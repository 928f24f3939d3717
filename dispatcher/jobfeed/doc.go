// Package jobfeed is the watch feed: a view of the FSM's change sets
// that lists the jobs in the order of their last change, each with the
// index of that change, so that a watcher resuming from an index gets
// every job changed after it, once, at its latest.
//
// A Feed consumes the FSM's change sets (fsm.FSM.Subscribe) on the apply
// goroutine and answers readers under its own lock; it holds job
// numbers and indexes only, and reads the jobs' statuses from the FSM
// when asked. Invariants, under the feed's lock:
//
//   - last[n] is the index of job n's last change consumed (for a job
//     forgotten with a summary, the forgetting: the summary is what the
//     watch says of it), 0 for a job unknown, forgotten without a
//     summary, or whose summary was pruned; the log holds, in index
//     order, one entry per change consumed since the last reset, and
//     the entry (i, n) is current while last[n] == i, stale after
//     (stale counts them; past half the log and minStale, they are
//     dropped).
//   - Every job and every summary the FSM holds has a current entry
//     once the feed consumed the change sets up to its last change (a
//     reset enters every one at its last change).
//   - complete is the last index all of whose commands the feed
//     consumed: an answer is current as of it.
package jobfeed
