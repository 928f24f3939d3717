package api_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// TestJobArenaReuse reads random bodies, of random sizes and forms, one
// after another into one JobArena, some after a body cut short, and checks
// each against DecodeJobs on its own: memory handed out again must carry
// nothing over from the body before (the jobs set every field, or leave it
// empty, at random).
func TestJobArenaReuse(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	var a api.JobArena
	for round := range 60 {
		n := []int{1, 3, 40, 700}[g.r.IntN(4)]
		jobs := make([]api.JobSpec, n)
		for i := range jobs {
			if g.r.IntN(3) == 0 {
				jobs[i] = api.JobSpec{Name: g.name("bare"), Tasks: []api.TaskGroupSpec{{Count: 1, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
					Image: api.Image{Rootfs: "/r"}, Command: []string{"/w"}, Resources: api.Resources{CPU: 1, Memory: 1}}}}}}}
			} else {
				jobs[i] = g.job()
			}
		}
		var body []byte
		if g.r.IntN(2) == 0 {
			b, err := json.Marshal(jobs)
			if err != nil {
				t.Fatal(err)
			}
			body = b
		} else {
			for i := range jobs {
				b, err := json.Marshal(&jobs[i])
				if err != nil {
					t.Fatal(err)
				}
				body = append(append(body, b...), '\n')
			}
		}
		want, err := api.DecodeJobs(body)
		if err != nil {
			t.Fatalf("round %d: DecodeJobs: %v", round, err)
		}
		if g.r.IntN(4) == 0 {
			// A body cut short first: read as DecodeJobs reads it (refused,
			// unless cut between NDJSON lines), and the arena still serves
			// the next one.
			cut := body[:g.r.IntN(len(body))]
			got, err := a.DecodeUnvalidated(cut)
			want, werr := api.DecodeJobs(cut)
			if (err == nil) != (werr == nil) || err == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d: a body cut at %d of %d bytes: %d jobs, %v; DecodeJobs: %d jobs, %v", round, len(cut), len(body), len(got), err, len(want), werr)
			}
		}
		got, err := a.DecodeUnvalidated(body)
		if err != nil {
			t.Fatalf("round %d: DecodeUnvalidated: %v", round, err)
		}
		if !reflect.DeepEqual(got, want) {
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("round %d (%d jobs): job %d read into reused memory\n got %+v\nwant %+v", round, n, i, got[i], want[i])
				}
			}
			t.Fatalf("round %d: %d jobs, want %d", round, len(got), len(want))
		}
	}
}
