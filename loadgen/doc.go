// Package loadgen drives a Sluice cluster with a described, seeded
// workload and measures what happens to every task, through the HTTP API
// only (it imports api and nothing else of ours).
//
// It owns two things:
//
//   - Workload and Generator: a workload says when jobs arrive (constant
//     rate, Poisson, or bursts of N jobs every period), for how long or how
//     many, and what they look like: the array size distribution (fixed,
//     uniform, Zipf), weighted resource shapes, the simulated run time
//     (fixed, uniform), the share of online jobs, weighted queues and
//     priorities. A workload comes from code, from flags (every
//     distribution has a text form such as "zipf:1.5,1000") or from a JSON
//     workload file read strictly (DecodeWorkload). The Generator turns it
//     into a stream of (offset, api.JobSpec).
//   - Driver: submits the stream to a cluster at the arrival times, open
//     loop (a slow cluster does not slow the arrivals; the lag shows it),
//     and returns a Result: offered and achieved throughput, and
//     p50/p90/p99/max of each latency, per task.
//
// # Invariants
//
//   - The same Workload, Seed included, gives the same stream: the same
//     jobs at the same offsets, on every machine. Arrivals and job shapes
//     come from two separate seeded streams, so changing one does not
//     change the other.
//   - Every job of a run carries the idempotency key "lg-<run>/<seq>" and
//     the label loadgen-run=<run>: a request retried after a failure that
//     may have committed it (timeout, unavailable, lost connection) never
//     creates a job twice, and the watch stream's events are matched to
//     the jobs by their key, even before the submit's reply arrives.
//   - The Driver's goroutines (the scheduler, Submitters submitters, the
//     watcher, at most MaxProbes probes) all end before Run returns.
//
// # What is measured, and how precisely
//
// Every latency starts when the job's request is first sent.
//
//   - committed: until the submit's reply, which the dispatcher sends only
//     after the jobs are committed. Exact.
//   - placed: from the watch stream (api.Client.Watch), which carries each
//     changed job's task counts. When a job's placed count (Total −
//     Pending: assigned, starting, running or done) grows by k at time t,
//     k of its tasks were placed at t. This costs one event per changed job,
//     not per task, so it keeps up with 100k tasks/s of large arrays. Its
//     resolution is the stream's delivery delay (the dispatcher wakes
//     watchers within a few ms of an apply) plus the stream's coalescing:
//     changes applied between two reads of the stream arrive as one event,
//     so times are upper bounds, late by at most that delay. Counts only
//     grow: a task retried after a failure is not placed twice.
//   - running: the counts do not tell assigned from running, so running
//     times are sampled: every ProbeEvery-th job of at most MaxProbeTasks
//     tasks, while fewer than MaxProbes are probed, has its tasks listed
//     (api.Client.Tasks) every PollInterval until each was seen running
//     or done. Resolution: PollInterval plus one listing. A probe's
//     listing also counts as a placement observation, which corrects the
//     watch for the jobs probed.
//   - lag: per job, how late its request left after its arrival time: the
//     driver's own backlog (every submitter busy).
//
// With DriverConfig.Interval, the same figures are also kept per interval
// of the offered window (Result.Intervals, and OnInterval as each ends):
// arrivals in the interval of their arrival time, everything else in the
// interval it was seen in, so that a long run at one rate reads as a
// series over time.
//
// Percentiles come from log-linear histograms (within 1% of the exact
// value) in constant memory, whatever the number of tasks.
//
// The watch starts from the beginning of what the dispatcher keeps; Run
// waits up to WarmUp for its first event before the first job, so that
// the first placements are not seen late.
//
// # Usage
//
//	w := loadgen.Workload{Seed: 7, Duration: api.Duration(30 * time.Second),
//		Arrival:   loadgen.Arrival{Process: loadgen.ArrivalPoisson, Rate: 200},
//		ArraySize: loadgen.IntDist{Kind: loadgen.KindZipf, Min: 1, Max: 1000, S: 1.5}}
//	c, _ := api.NewClient(api.ClientConfig{Addrs: []string{"http://127.0.0.1:8080"}})
//	d, err := loadgen.NewDriver(loadgen.DriverConfig{Client: c, Workload: w})
//	if err != nil { ... }
//	res, err := d.Run(ctx)
package loadgen
