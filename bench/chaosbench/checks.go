package chaosbench

import (
	"context"
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluicehq/sluice/api"
)

// keyState is the model's state of one idempotency key: whether its job
// exists, its ID (empty while only a submit of unknown outcome created
// it), and whether a cancel of it took effect.
type keyState struct {
	Exists    bool
	ID        string
	Cancelled bool
}

func terminal(s api.JobState) bool {
	return s == api.JobSucceeded || s == api.JobFailed || s == api.JobCancelled
}

// jobModel is the sequential specification of the job API, per key:
//
//   - submit(key) creates the key's job once; every acknowledged submit
//     of the key answers the same ID.
//   - get(key) sees no job before the key's job is created and exactly
//     one after, with its ID; it sees the job cancelled only after a
//     cancel took effect, and after one, cancelled or otherwise ended (a
//     job that ended before its cancel keeps its state).
//   - cancel(key) makes the job cancelled; it needs the job to exist.
//
// An operation with an unknown outcome accepts any output.
var jobModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			k := op.Input.(opInput).Key
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, k := range order {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return keyState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(keyState), input.(opInput), output.(opOutput)
		switch in.Kind {
		case opSubmit:
			if !s.Exists {
				return true, keyState{Exists: true, ID: out.ID}
			}
			if out.Unknown || s.ID == "" || s.ID == out.ID {
				if s.ID == "" {
					s.ID = out.ID
				}
				return true, s
			}
			return false, s
		case opGet:
			if !s.Exists {
				return out.Count == 0, s
			}
			if out.Count != 1 || (s.ID != "" && out.ID != s.ID) {
				return false, s
			}
			s.ID = out.ID
			if s.Cancelled {
				return terminal(out.State), s
			}
			return out.State != api.JobCancelled, s
		case opCancel:
			if !s.Exists {
				return false, s
			}
			s.Cancelled = true
			return true, s
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(opInput), output.(opOutput)
		if out.Unknown {
			return fmt.Sprintf("%s(%s) → ?", in.Kind, in.Key)
		}
		if in.Kind == opGet {
			return fmt.Sprintf("get(%s) → %d job(s) %s %s", in.Key, out.Count, out.ID, out.State)
		}
		return fmt.Sprintf("%s(%s) → %s", in.Kind, in.Key, out.ID)
	},
}

// Linearizable is the verdict of the linearizability check.
type Linearizable string

// Verdicts.
const (
	LinOK      Linearizable = "yes"
	LinIllegal Linearizable = "no"
	LinUnknown Linearizable = "unknown" // the check timed out
)

// checkLinearizable runs porcupine over ops with the job model.
func checkLinearizable(ops []porcupine.Operation, timeout time.Duration) Linearizable {
	switch porcupine.CheckOperationsTimeout(jobModel, ops, timeout) {
	case porcupine.Ok:
		return LinOK
	case porcupine.Illegal:
		return LinIllegal
	}
	return LinUnknown
}

// Tally is what the final listing says of the submitted keys.
type Tally struct {
	// Acked counts the acknowledged submits (one job each).
	Acked int `json:"acked"`
	// Unknown counts the submits never acknowledged.
	Unknown int `json:"unknown"`
	// Lost counts acknowledged keys with no job, or whose job has another
	// ID than the acknowledgement named.
	Lost int `json:"lost"`
	// Duplicates counts jobs beyond the first of any key.
	Duplicates int `json:"duplicates"`
	// Jobs counts the run's jobs listed; NotFinal those not in a final
	// state, and TasksNotFinal their tasks not done.
	Jobs          int   `json:"jobs"`
	NotFinal      int   `json:"not_final"`
	TasksNotFinal int64 `json:"tasks_not_final"`
	// Examples names a few keys of each problem.
	Examples []string `json:"examples,omitempty"`
}

// listRun lists every job of the run, with consistent reads.
func listRun(ctx context.Context, c *api.Client, runID string) ([]api.JobStatus, error) {
	var all []api.JobStatus
	q := api.JobQuery{Labels: map[string]string{LabelRun: runID}, Limit: 500, Consistent: true}
	for range 10000 {
		page, err := c.Jobs(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("chaosbench: list the run's jobs: %w", err)
		}
		all = append(all, page.Jobs...)
		if page.Next == "" {
			return all, nil
		}
		if page.Next == q.After {
			return nil, fmt.Errorf("chaosbench: the listing does not advance past %q", q.After)
		}
		q.After = page.Next
	}
	return nil, fmt.Errorf("chaosbench: the listing has more than 10000 pages")
}

// tally compares the listing with what was submitted.
func tally(keys []submitted, jobs []api.JobStatus) Tally {
	var t Tally
	byKey := map[string][]api.JobStatus{}
	for _, j := range jobs {
		k := j.Spec.Labels[LabelKey]
		byKey[k] = append(byKey[k], j)
		if !terminal(j.State) {
			t.NotFinal++
			t.TasksNotFinal += j.Tasks.Pending + j.Tasks.Active
		}
	}
	t.Jobs = len(jobs)
	example := func(format string, args ...any) {
		if len(t.Examples) < 10 {
			t.Examples = append(t.Examples, fmt.Sprintf(format, args...))
		}
	}
	for _, s := range keys {
		got := byKey[s.key]
		if len(got) > 1 {
			t.Duplicates += len(got) - 1
			example("key %s: %d jobs", s.key, len(got))
		}
		if !s.acked {
			t.Unknown++
			continue
		}
		t.Acked++
		if len(got) == 0 {
			t.Lost++
			example("key %s: acknowledged as %s, no job", s.key, s.id)
		} else if got[0].ID != s.id && (len(got) < 2 || got[1].ID != s.id) {
			t.Lost++
			example("key %s: acknowledged as %s, listed as %s", s.key, s.id, got[0].ID)
		}
	}
	for _, j := range jobs {
		if !terminal(j.State) && len(t.Examples) < 10 {
			example("job %s (key %s): %s, %d pending, %d active", j.ID, j.Spec.Labels[LabelKey], j.State, j.Tasks.Pending, j.Tasks.Active)
		}
	}
	return t
}
