package chaosbench

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluicehq/sluice/api"
)

func op(client int, kind opKind, key string, call, ret int64, out opOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: opInput{Kind: kind, Key: key}, Call: call, Output: out, Return: ret}
}

func TestJobModel(t *testing.T) {
	const never = 1 << 62
	for _, c := range []struct {
		name string
		ops  []porcupine.Operation
		want Linearizable
	}{
		{"submit then read", []porcupine.Operation{
			op(0, opSubmit, "k", 0, 10, opOutput{ID: "j1"}),
			op(1, opGet, "k", 11, 12, opOutput{Count: 1, ID: "j1", State: api.JobRunning}),
		}, LinOK},
		{"a read concurrent with the submit may miss it", []porcupine.Operation{
			op(0, opSubmit, "k", 0, 10, opOutput{ID: "j1"}),
			op(1, opGet, "k", 5, 6, opOutput{Count: 0}),
		}, LinOK},
		{"lost: a read after the acknowledgement misses the job", []porcupine.Operation{
			op(0, opSubmit, "k", 0, 10, opOutput{ID: "j1"}),
			op(1, opGet, "k", 11, 12, opOutput{Count: 0}),
		}, LinIllegal},
		{"a retried submit answers another ID", []porcupine.Operation{
			op(0, opSubmit, "k", 0, 10, opOutput{ID: "j1"}),
			op(0, opSubmit, "k", 11, 12, opOutput{ID: "j2"}),
		}, LinIllegal},
		{"duplicate: two jobs of one key", []porcupine.Operation{
			op(0, opSubmit, "k", 0, 10, opOutput{ID: "j1"}),
			op(1, opGet, "k", 11, 12, opOutput{Count: 2, ID: "j1", State: api.JobRunning}),
		}, LinIllegal},
		{"stale read: seen, then not", []porcupine.Operation{
			op(0, opSubmit, "k", 0, never, opOutput{Unknown: true}),
			op(1, opGet, "k", 1, 2, opOutput{Count: 1, ID: "j1", State: api.JobPending}),
			op(1, opGet, "k", 3, 4, opOutput{Count: 0}),
		}, LinIllegal},
		{"an unknown submit may take effect late", []porcupine.Operation{
			op(0, opSubmit, "k", 0, never, opOutput{Unknown: true}),
			op(1, opGet, "k", 1, 2, opOutput{Count: 0}),
			op(1, opGet, "k", 3, 4, opOutput{Count: 1, ID: "j1", State: api.JobPending}),
		}, LinOK},
		{"cancelled before the cancel", []porcupine.Operation{
			op(0, opSubmit, "k", 0, 1, opOutput{ID: "j1"}),
			op(1, opGet, "k", 2, 3, opOutput{Count: 1, ID: "j1", State: api.JobCancelled}),
			op(0, opCancel, "k", 4, 5, opOutput{ID: "j1"}),
		}, LinIllegal},
		{"running after the cancel returned", []porcupine.Operation{
			op(0, opSubmit, "k", 0, 1, opOutput{ID: "j1"}),
			op(0, opCancel, "k", 2, 3, opOutput{ID: "j1"}),
			op(1, opGet, "k", 4, 5, opOutput{Count: 1, ID: "j1", State: api.JobRunning}),
		}, LinIllegal},
		{"cancelled after the cancel; keys apart", []porcupine.Operation{
			op(0, opSubmit, "k", 0, 1, opOutput{ID: "j1"}),
			op(0, opCancel, "k", 2, 3, opOutput{ID: "j1"}),
			op(1, opGet, "k", 4, 5, opOutput{Count: 1, ID: "j1", State: api.JobCancelled}),
			op(1, opGet, "other", 4, 5, opOutput{Count: 0}),
		}, LinOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := checkLinearizable(c.ops, 10*time.Second); got != c.want {
				t.Errorf("linearizable = %s, want %s", got, c.want)
			}
		})
	}
}

func TestTally(t *testing.T) {
	job := func(id, key string, st api.JobState, pending int64) api.JobStatus {
		return api.JobStatus{ID: id, State: st, Spec: api.JobSpec{Labels: map[string]string{LabelKey: key}}, Tasks: api.TaskCounts{Pending: pending}}
	}
	keys := []submitted{
		{key: "a", id: "j1", acked: true},
		{key: "b", id: "j2", acked: true}, // lost
		{key: "c", id: "j3", acked: true}, // two jobs
		{key: "d"},                        // unknown, never created
		{key: "e", id: "j9", acked: true}, // listed under another ID
	}
	jobs := []api.JobStatus{
		job("j1", "a", api.JobSucceeded, 0),
		job("j3", "c", api.JobSucceeded, 0), job("j4", "c", api.JobRunning, 2),
		job("j5", "e", api.JobCancelled, 0),
	}
	got := tally(keys, jobs)
	if got.Acked != 4 || got.Unknown != 1 || got.Lost != 2 || got.Duplicates != 1 || got.Jobs != 4 || got.NotFinal != 1 || got.TasksNotFinal != 2 {
		t.Errorf("tally = %+v", got)
	}
	if len(got.Examples) != 4 {
		t.Errorf("examples %q, want one per problem", got.Examples)
	}
}
