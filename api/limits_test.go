package api_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

func TestBodyTooLarge(t *testing.T) {
	body := make([]byte, api.MaxBodyBytes+1)
	for name, decode := range map[string]func([]byte) ([]api.JobSpec, error){
		"DecodeJobs": api.DecodeJobs, "DecodeUnvalidated": new(api.JobArena).DecodeUnvalidated,
	} {
		if _, err := decode(body); !errors.Is(err, api.ErrTooLarge) || !strings.Contains(err.Error(), "bytes") {
			t.Fatalf("%s(oversized) = %v, want ErrTooLarge naming the size", name, err)
		}
	}
}

func TestTooManyItems(t *testing.T) {
	body := bytes.Repeat([]byte("{}\n"), api.MaxItemsPerRequest+1)
	_, err := api.DecodeJobs(body)
	if !errors.Is(err, api.ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprint(api.MaxItemsPerRequest)) {
		t.Fatalf("NDJSON: %v, want ErrTooLarge naming the limit", err)
	}
	body = append([]byte("["), bytes.Repeat([]byte("{},"), api.MaxItemsPerRequest+1)...)
	body[len(body)-1] = ']'
	if _, err = api.DecodeCapboxRequests(body); !errors.Is(err, api.ErrTooLarge) {
		t.Fatalf("array: %v, want ErrTooLarge", err)
	}
}

func TestProblemsAreCapped(t *testing.T) {
	body := bytes.Repeat([]byte("{}\n"), api.MaxProblems)
	_, err := api.DecodeJobs(body)
	var ve *api.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	if len(ve.Problems) != api.MaxProblems || ve.Total != 2*api.MaxProblems {
		t.Fatalf("listed %d of %d problems, want %d of %d", len(ve.Problems), ve.Total, api.MaxProblems, 2*api.MaxProblems)
	}
	if !strings.HasSuffix(err.Error(), fmt.Sprintf("and %d more", api.MaxProblems)) {
		t.Errorf("error does not count the unlisted problems: %.200s", err)
	}
	if ve.Problems[3].Item != 1 || ve.Problems[3].Path != "jobs[1].tasks" {
		t.Errorf("problem 3 is %+v, want item 1 at jobs[1].tasks", ve.Problems[3])
	}
}

// validJob returns a minimal valid job for limit tests to break.
func validJob() api.JobSpec {
	return api.JobSpec{Name: "j", Tasks: []api.TaskGroupSpec{{Count: 1, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
		Image:     api.Image{Rootfs: "/img"},
		Command:   []string{"/bin/true"},
		Resources: api.Resources{CPU: 1, Memory: 1},
	}}}}}}
}

func TestLimits(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	many := func(n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprintf("n%d", i)
		}
		return s
	}
	manyMap := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("K%d", i)] = "v"
		}
		return m
	}
	for _, tc := range []struct {
		name, path string
		edit       func(*api.JobSpec)
	}{
		{"name", "jobs[0].name", func(j *api.JobSpec) { j.Name = long(api.MaxNameLen + 1) }},
		{"labels", "jobs[0].labels", func(j *api.JobSpec) { j.Labels = manyMap(api.MaxLabels + 1) }},
		{"label value", `jobs[0].labels["k"]`, func(j *api.JobSpec) { j.Labels = map[string]string{"k": long(api.MaxNameLen + 1)} }},
		{"label key", `jobs[0].labels["` + long(api.MaxLabelKeyLen+1) + `"]`, func(j *api.JobSpec) { j.Labels = map[string]string{long(api.MaxLabelKeyLen + 1): ""} }},
		{"constraints", "jobs[0].constraints", func(j *api.JobSpec) {
			j.Constraints = make([]api.Constraint, api.MaxConstraints+1)
			for i := range j.Constraints {
				j.Constraints[i] = api.Constraint{Key: "k", Op: api.OpExists}
			}
		}},
		{"constraint values", "jobs[0].constraints[0].values", func(j *api.JobSpec) {
			j.Constraints = []api.Constraint{{Key: "k", Op: api.OpIn, Values: many(api.MaxConstraintValues + 1)}}
		}},
		{"task groups", "jobs[0].tasks", func(j *api.JobSpec) {
			g := j.Tasks[0]
			j.Tasks = nil
			for i := range api.MaxTaskGroups + 1 {
				g.Name = fmt.Sprintf("g%d", i)
				j.Tasks = append(j.Tasks, g)
			}
		}},
		{"count", "jobs[0].tasks[0].count", func(j *api.JobSpec) { j.Tasks[0].Count = api.MaxTaskCount + 1 }},
		{"preferred nodes", "jobs[0].tasks[0].preferred_nodes", func(j *api.JobSpec) { j.Tasks[0].PreferredNodes = many(api.MaxPreferredNodes + 1) }},
		{"containers", "jobs[0].tasks[0].pod.containers", func(j *api.JobSpec) {
			c := j.Tasks[0].Pod.Containers[0]
			for i := range api.MaxContainersPerPod {
				c.Name = fmt.Sprintf("x%d", i)
				j.Tasks[0].Pod.Containers = append(j.Tasks[0].Pod.Containers, c)
			}
		}},
		{"args", "jobs[0].tasks[0].pod.containers[0].args", func(j *api.JobSpec) { j.Tasks[0].Pod.Containers[0].Args = many(api.MaxArgs) }},
		{"arg length", "jobs[0].tasks[0].pod.containers[0].args[0]", func(j *api.JobSpec) { j.Tasks[0].Pod.Containers[0].Args = []string{long(api.MaxStringLen + 1)} }},
		{"env", "jobs[0].tasks[0].pod.containers[0].env", func(j *api.JobSpec) { j.Tasks[0].Pod.Containers[0].Env = manyMap(api.MaxEnv + 1) }},
		{"ports", "jobs[0].tasks[0].pod.containers[0].resources.ports", func(j *api.JobSpec) {
			for i := range api.MaxPorts + 1 {
				j.Tasks[0].Pod.Containers[0].Resources.Ports = append(j.Tasks[0].Pod.Containers[0].Resources.Ports, api.Port{Name: fmt.Sprintf("p%d", i)})
			}
		}},
		{"filters", "jobs[0].policy.filters", func(j *api.JobSpec) { j.Policy = &api.Policy{Filters: make([]string, api.MaxPluginRefs+1)} }},
		{"idempotency key", "jobs[0].idempotency_key", func(j *api.JobSpec) { j.IdempotencyKey = long(api.MaxIdempotencyKeyLen + 1) }},
		{"backoff", "jobs[0].retry.backoff", func(j *api.JobSpec) { j.Retry.Backoff = api.Duration(-time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := validJob()
			j.SetDefaults()
			if err := api.ValidateJobs([]api.JobSpec{j}); err != nil {
				t.Fatalf("base job invalid: %v", err)
			}
			tc.edit(&j)
			err := api.ValidateJobs([]api.JobSpec{j})
			var ve *api.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("no error, want one at %s", tc.path)
			}
			for _, p := range ve.Problems {
				if p.Path == tc.path {
					return
				}
			}
			t.Errorf("no problem at %s in %v", tc.path, err)
		})
	}
}
