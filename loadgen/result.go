package loadgen

import "time"

// Result is what a Driver's run measured. Latencies are from the send of
// a job's request (its first attempt) and counted per task, except Lag.
type Result struct {
	// RunID is the run's ID (LabelRun's value on its jobs).
	RunID string `json:"run_id"`
	// Workload is the workload run, with defaults applied.
	Workload Workload `json:"workload"`
	// Seconds is the run's length, from its start to the end of the
	// drain; SubmitSeconds to the last submit's reply.
	Seconds       float64 `json:"seconds"`
	SubmitSeconds float64 `json:"submit_seconds"`
	// Jobs and Tasks count what was submitted (sent at least once).
	Jobs  int64 `json:"jobs"`
	Tasks int64 `json:"tasks"`
	// Offered is the rate the workload asked for: the jobs and tasks
	// generated over the window they arrived in (the workload's duration,
	// or its jobs at its nominal rate).
	Offered Rate `json:"offered"`
	// Committed and Placed are the rates achieved: tasks acknowledged
	// (committed) and seen placed, each over the offered window or, when
	// the last of them came later, the time from the start to it.
	Committed Rate `json:"committed"`
	Placed    Rate `json:"placed"`
	// CommittedTasks, PlacedTasks and RunningTasks count tasks: those
	// acknowledged, those seen placed, and those of probed jobs seen
	// running. UnplacedTasks were committed but not seen placed by the
	// end of the drain; FailedTasks were in requests that failed for good.
	CommittedTasks int64 `json:"committed_tasks"`
	PlacedTasks    int64 `json:"placed_tasks"`
	RunningTasks   int64 `json:"running_tasks"`
	UnplacedTasks  int64 `json:"unplaced_tasks"`
	FailedTasks    int64 `json:"failed_tasks"`
	// Latency holds the latencies measured.
	Latency Latencies `json:"latency"`
	// Requests counts submit requests sent, retries included; Retries the
	// retries; Errors the requests that failed for good, and
	// ErrorSamples a few of their distinct messages.
	Requests     int64    `json:"requests"`
	Retries      int64    `json:"retries"`
	Errors       int64    `json:"errors"`
	ErrorSamples []string `json:"error_samples,omitempty"`
	// WatchReconnects counts the times the watch stream was resumed.
	WatchReconnects int64 `json:"watch_reconnects"`
	// WatchIndex is the raft index of the last watch event seen (or
	// DriverConfig.WatchFrom): where a next run's watch may start.
	WatchIndex uint64 `json:"watch_index"`
	// ProbeErrors counts failed task listings of probed jobs;
	// ProbesSkipped the jobs chosen for probing while MaxProbes were busy.
	ProbeErrors   int64 `json:"probe_errors"`
	ProbesSkipped int64 `json:"probes_skipped"`
	// Interrupted is true when the run's context ended it early.
	Interrupted bool `json:"interrupted,omitempty"`
	// Intervals are the offered window's intervals, in order, with
	// DriverConfig.Interval; the drain after the window is in none.
	Intervals []Interval `json:"intervals,omitempty"`
}

// Interval is what a Driver measured over one interval of its offered
// window (DriverConfig.Interval). Arrivals count in the interval of their
// arrival time; everything else in the one it was seen in: a task placed
// in an interval may have arrived in an earlier one. An interval ends
// when the Driver's scheduling goroutine sees its end pass, late by that
// goroutine's wake-up at most.
type Interval struct {
	// Index numbers the intervals from 0; StartSeconds is the interval's
	// start after the run's, Seconds its length.
	Index        int     `json:"index"`
	StartSeconds float64 `json:"start_seconds"`
	Seconds      float64 `json:"seconds"`
	// Offered is the jobs and tasks that arrived in the interval, per
	// second of it; Committed and Placed the tasks acknowledged and seen
	// placed in it, per second.
	Offered   Rate `json:"offered"`
	Committed Rate `json:"committed"`
	Placed    Rate `json:"placed"`
	// OfferedTasks arrived in the interval; CommittedTasks, PlacedTasks
	// and RunningTasks (of probed jobs) were seen committed, placed and
	// running in it.
	OfferedTasks   int64 `json:"offered_tasks"`
	CommittedTasks int64 `json:"committed_tasks"`
	PlacedTasks    int64 `json:"placed_tasks"`
	RunningTasks   int64 `json:"running_tasks"`
	// Latency holds the latencies of what was seen in the interval: the
	// lag of the jobs sent, the commit of the tasks acknowledged, and so
	// on.
	Latency Latencies `json:"latency"`
	// Retries counts the requests sent again in the interval, Errors those
	// that failed for good.
	Retries int64 `json:"retries"`
	Errors  int64 `json:"errors"`
}

// Rate is a throughput.
type Rate struct {
	JobsPerSec  float64 `json:"jobs_per_sec,omitempty"`
	TasksPerSec float64 `json:"tasks_per_sec"`
}

// Latencies are the latencies a run measures.
type Latencies struct {
	// Lag is, per job, how late its request was sent after its arrival
	// time: the driver falling behind (all submitters busy) shows here.
	Lag LatencyStats `json:"lag"`
	// Committed is submit to the reply, which comes after commit.
	Committed LatencyStats `json:"committed"`
	// Placed is submit to the task seen placed on the watch stream.
	Placed LatencyStats `json:"placed"`
	// Running is submit to the task seen running, for probed jobs.
	Running LatencyStats `json:"running"`
}

func (d *Driver) result(start, submitEnd, end time.Time, window time.Duration, generated int64) Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := Result{
		RunID:           d.cfg.RunID,
		Workload:        d.cfg.Workload,
		Seconds:         end.Sub(start).Seconds(),
		SubmitSeconds:   submitEnd.Sub(start).Seconds(),
		Jobs:            d.p.jobs.Load(),
		Tasks:           d.p.tasks.Load(),
		CommittedTasks:  d.p.committed.Load(),
		PlacedTasks:     d.p.placed.Load(),
		RunningTasks:    d.p.running.Load(),
		FailedTasks:     d.mu.failedTasks,
		Requests:        d.p.requests.Load(),
		Retries:         d.p.retries.Load(),
		Errors:          d.p.errors.Load(),
		ErrorSamples:    append([]string(nil), d.mu.errSamples...),
		WatchReconnects: d.p.reconnects.Load(),
		WatchIndex:      d.p.watchIndex.Load(),
		ProbeErrors:     d.p.probeErrors.Load(),
		ProbesSkipped:   d.p.probesSkipped.Load(),
		Latency: Latencies{
			Lag:       d.mu.lag.stats(),
			Committed: d.mu.committed.stats(),
			Placed:    d.mu.placed.stats(),
			Running:   d.mu.running.stats(),
		},
	}
	for _, rec := range d.mu.jobs {
		if rec.committed && !rec.failed {
			r.UnplacedTasks += rec.tasks - rec.placed
		}
	}
	if s := window.Seconds(); s > 0 {
		r.Offered = Rate{JobsPerSec: float64(generated) / s, TasksPerSec: float64(r.Tasks) / s}
		if generated != r.Jobs {
			// Interrupted: the tasks of the jobs never sent are unknown.
			r.Offered.TasksPerSec = 0
		}
	}
	// An achieved rate is over the offered window, or longer when the
	// cluster fell behind: a cluster that keeps up achieves the offered
	// rate, one that does not achieves less.
	achieved := func(n int64, last time.Time) float64 {
		if last.IsZero() {
			return 0
		}
		if s := max(last.Sub(start), window).Seconds(); s > 0 {
			return float64(n) / s
		}
		return 0
	}
	r.Committed.TasksPerSec = achieved(r.CommittedTasks, d.mu.lastCommit)
	r.Placed.TasksPerSec = achieved(r.PlacedTasks, d.mu.lastPlaced)
	return r
}
