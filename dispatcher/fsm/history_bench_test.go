package fsm

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// histWriter keeps nothing, and counts the bytes of the summary records
// set (key and value).
type histWriter struct {
	discard
	summaries int
}

func (w *histWriter) Set(k, v []byte) {
	if bytes.HasPrefix(k, []byte(prefixHistory)) {
		w.summaries += len(k) + len(v)
	}
	w.discard.Set(k, v)
}

// finishedJobs returns an FSM holding n jobs of one task each, named,
// with two labels, that ran and succeeded, and their IDs.
func finishedJobs(b *testing.B, n int) (*FSM, []string, time.Time) {
	f, must, now := benchNodes(b, 100)
	specs := benchSpecs(n, true)
	ids := make([]string, n)
	p := &Plan{Term: 1, Now: now}
	for i := range specs {
		specs[i].Labels = map[string]string{"team": "data", "run": fmt.Sprintf("nightly-%d", i)}
		specs[i].Tasks[0].Count = 1
		specs[i].Tasks[0].Pod.Containers[0].Resources = api.Resources{CPU: 10, Memory: 1 << 20}
		ids[i] = jobID(uint64(1 + i))
		p.Assignments = append(p.Assignments, Assignment{
			Group: GroupKey{Job: ids[i], Group: specs[i].Tasks[0].Name}, Node: fmt.Sprintf("node-%05d", i%100), Count: 1,
		})
	}
	must(SubmitJobs(now, specs))
	must(CommitPlan(p), nil)
	for _, st := range []api.TaskState{api.TaskRunning, api.TaskSucceeded} {
		var reps []Report
		f.eachTaskLocked(func(t *task) {
			reps = append(reps, Report{Node: t.node, TaskReport: &api.TaskReport{TaskID: taskID(t.key, t.attempt), State: st, Reason: api.ReasonExited, Time: now}})
		})
		slices.SortStableFunc(reps, func(a, b Report) int { return strings.Compare(a.Node, b.Node) })
		for len(reps) > 0 {
			k := min(len(reps), 20_000)
			must(UpdateTasks(now, reps[:k]), nil)
			reps = reps[k:]
		}
	}
	f.writeDeferred(&discard{})
	return f, ids, now
}

// forgetAll forgets ids with forget, MaxForget a command, writing to w,
// and returns the time the commands took to apply.
func forgetAll(b *testing.B, f *FSM, w writer, ids []string, forget func(time.Time, []string) []byte, now time.Time) time.Duration {
	var took time.Duration
	for len(ids) > 0 {
		k := min(len(ids), MaxForget)
		cmd := forget(now, ids[:k])
		start := time.Now()
		res, err := f.apply(w, 2, cmd)
		took += time.Since(start)
		if r, _ := DecodeForgetResult(res); err != nil || r.Forgotten != k {
			b.Fatalf("forget: %+v, %v", r, err)
		}
		ids = ids[k:]
	}
	return took
}

// BenchmarkHistorySummary measures what a summary of a forgotten job
// costs (ForgetJobsToHistory): 20,000 jobs of one task, named, with two
// labels, run and succeed, and are forgotten, with and without history.
// It reports the summaries' record bytes (key and value) per job, the
// heap they hold (after a collection, the heap with them less the heap
// once they are dropped) per job, and the time forgetting takes per job
// with history and without.
func BenchmarkHistorySummary(b *testing.B) {
	const n = 20_000
	var storeBytes, heapBytes, withNs, withoutNs float64
	for b.Loop() {
		f, ids, now := finishedJobs(b, n)
		withoutNs = float64(forgetAll(b, f, &discard{}, ids, ForgetJobs, now).Nanoseconds()) / n
		f, ids, now = finishedJobs(b, n)
		var w histWriter
		withNs = float64(forgetAll(b, f, &w, ids, ForgetJobsToHistory, now).Nanoseconds()) / n
		if f.HistoryLen() != n {
			b.Fatalf("%d summaries, want %d", f.HistoryLen(), n)
		}
		with := heapInUse()
		f.mu.history = history{}
		heapBytes = float64(with-heapInUse()) / n
		storeBytes = float64(w.summaries) / n
		runtime.KeepAlive(f)
	}
	b.ReportMetric(storeBytes, "store-bytes/job")
	b.ReportMetric(heapBytes, "heap-bytes/job")
	b.ReportMetric(withNs, "forget-ns/job")
	b.ReportMetric(withoutNs, "forget-plain-ns/job")
}
