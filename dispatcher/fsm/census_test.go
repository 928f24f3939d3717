package fsm

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestCensus checks the counts of jobs by state and of tasks by queue and
// class against what was submitted and cancelled.
func TestCensus(t *testing.T) {
	q := newSeq(t)
	now := time.Unix(1, 0)
	specs := benchSpecs(3, false) // 100 tasks each
	specs[1].Queue, specs[1].QoS = "batch", api.QoSOnline
	specs[2].Queue = "batch"
	for i := range specs {
		specs[i].SetDefaults()
	}
	cmd, err := SubmitJobs(now, specs)
	if err != nil {
		t.Fatal(err)
	}
	q.apply(cmd)
	q.apply(CancelJob(now, "j3"))

	c := q.f.Census()
	var want [NumJobStates]int64
	want[JobPending], want[JobCancelled] = 2, 1
	if c.Jobs != want {
		t.Errorf("Jobs = %v, want %v", c.Jobs, want)
	}
	wantQ := []QueueTasks{
		{Queue: "batch", QoS: api.QoSOffline, Pending: 0},
		{Queue: "batch", QoS: api.QoSOnline, Pending: 100},
		{Queue: specs[0].Queue, QoS: api.QoSOffline, Pending: 100},
	}
	slices.SortFunc(wantQ, func(a, b QueueTasks) int {
		if a.Queue != b.Queue {
			if a.Queue < b.Queue {
				return -1
			}
			return 1
		}
		if a.QoS < b.QoS {
			return -1
		}
		return 1
	})
	if !slices.Equal(c.Queues, wantQ) {
		t.Errorf("Queues = %+v, want %+v", c.Queues, wantQ)
	}
	if c := New().Census(); c.Jobs != ([NumJobStates]int64{}) || len(c.Queues) != 0 {
		t.Errorf("empty FSM: %+v", c)
	}
}
