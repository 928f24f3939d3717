package chaosbench

import (
	"os"
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

func TestDoubleRuns(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/pods.log"
	const s = int64(time.Second)
	log := "start 1000000000 n1 j1.0.0.1\n" + // ends at the kill, 5 s
		"start 1000000000 n1 j1.0.1.1\nend 2000000000 n1 j1.0.1.1 0\n" +
		"killed 5000000000\n" +
		"start 3000000000 n2 j1.0.0.2\nend 9000000000 n2 j1.0.0.2 0\n" + // overlaps attempt 1 by 2 s
		"start 6000000000 n2 j2.0.0.1\n" // still open: ends at now
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	runs, err := readPodLog(path, time.Unix(0, 10*s))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 || runs[0].end != 5*s || runs[1].end != 2*s || runs[3].end != 10*s {
		t.Fatalf("runs %+v", runs)
	}
	d := doubleRuns(runs)
	if d.Tasks != 1 || d.MaxMs != 2000 || d.MaxTask != "j1.0.0" {
		t.Errorf("double runs %+v, want task j1.0.0 twice for 2000 ms", d)
	}
	if err := markKilled(path, time.Unix(0, 11*s)); err != nil {
		t.Fatal(err)
	}
	if runs, err = readPodLog(path, time.Unix(0, 20*s)); err != nil || runs[3].end != 11*s {
		t.Errorf("after a second mark: %+v, %v", runs, err)
	}
	if _, err := readPodLog(dir+"/none", time.Now()); err == nil {
		t.Error("a missing log read without an error")
	}
	if err := os.WriteFile(path, []byte("start x n1 p\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readPodLog(path, time.Now()); err == nil {
		t.Error("a malformed time read without an error")
	}
}

func TestProberWaits(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p := &prober{probes: []*probe{
		{call: at(0), placed: at(100)},
		{call: at(1000), placed: at(2500)}, // during the fault, waits 1.5 s
		{call: at(1200), placed: at(1300)},
		{call: at(1900)},                   // never placed: waits until the end
		{call: at(5000), placed: at(5050)}, // after the recovery
	}}
	if w, ok := p.longestWait(at(900), at(1500), at(6000)); !ok || w != 1500*time.Millisecond {
		t.Errorf("longest wait in [0.9 s, 1.5 s] = %v, %v; want 1.5s", w, ok)
	}
	if w, ok := p.longestWait(at(1800), at(2000), at(6000)); !ok || w != 4100*time.Millisecond {
		t.Errorf("longest wait of the unplaced probe = %v, %v; want 4.1s (until the end)", w, ok)
	}
	if _, ok := p.longestWait(at(3000), at(4000), at(6000)); ok {
		t.Error("a wait found where no probe was called")
	}
	if first, ok := p.firstPlacedAfter(at(900)); !ok || !first.Equal(at(1300)) {
		t.Errorf("first placed after 0.9 s = %v, %v; want 1.3 s", first.Sub(t0), ok)
	}
	if _, ok := p.firstPlacedAfter(at(5001)); ok {
		t.Error("a placement found after the last probe")
	}
}
