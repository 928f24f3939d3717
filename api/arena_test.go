package api_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// TestJobArenaReuse reads random bodies, of random sizes and forms, one
// after another into one JobArena, and checks each against DecodeJobs on
// its own: memory handed out again must carry nothing over from the body
// before (the jobs set every field, or leave it empty, at random).
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
