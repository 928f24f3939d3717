package api_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/api"
)

// TestTaskTransitions pins the task state machine of DESIGN.md: every pair of
// states is either in the allowed set below or rejected.
func TestTaskTransitions(t *testing.T) {
	allowed := map[[2]api.TaskState]bool{}
	for _, p := range [][2]api.TaskState{
		{api.TaskPending, api.TaskAssigned}, {api.TaskPending, api.TaskKilled},
		{api.TaskAssigned, api.TaskStarting}, {api.TaskAssigned, api.TaskRunning},
		{api.TaskAssigned, api.TaskFailed}, {api.TaskAssigned, api.TaskKilled}, {api.TaskAssigned, api.TaskLost},
		{api.TaskStarting, api.TaskRunning}, {api.TaskStarting, api.TaskSucceeded},
		{api.TaskStarting, api.TaskFailed}, {api.TaskStarting, api.TaskKilled}, {api.TaskStarting, api.TaskLost},
		{api.TaskRunning, api.TaskSucceeded}, {api.TaskRunning, api.TaskFailed},
		{api.TaskRunning, api.TaskKilled}, {api.TaskRunning, api.TaskLost},
		{api.TaskFailed, api.TaskPending}, {api.TaskKilled, api.TaskPending}, {api.TaskLost, api.TaskPending},
	} {
		allowed[p] = true
	}
	states := append(api.TaskStates(), api.TaskState(200))
	for _, from := range states {
		for _, to := range states {
			err := api.CheckTaskTransition(from, to)
			if allowed[[2]api.TaskState{from, to}] != (err == nil) {
				t.Errorf("CheckTaskTransition(%s, %s) = %v", from, to, err)
			}
			if err != nil && !errors.Is(err, api.ErrBadTransition) {
				t.Errorf("error %v does not wrap ErrBadTransition", err)
			}
			if slices.Contains(from.Next(), to) != (err == nil) {
				t.Errorf("%s.Next() disagrees with CheckTaskTransition for %s", from, to)
			}
		}
	}
	if api.TaskSucceeded.Next() != nil || !api.TaskSucceeded.Done() || api.TaskRunning.Done() {
		t.Error("succeeded must be final and done; running not done")
	}
}

func TestCapboxTransitions(t *testing.T) {
	reach := reachable(api.CapboxPending, func(s api.CapboxState) []api.CapboxState { return s.Next() })
	if len(reach) != len(api.CapboxStates()) {
		t.Errorf("from pending only %v are reachable", reach)
	}
	for _, s := range api.CapboxStates() {
		if s.Done() != (len(s.Next()) == 0) {
			t.Errorf("%s: Done()=%v but Next()=%v", s, s.Done(), s.Next())
		}
		if err := api.CheckCapboxTransition(s, api.CapboxPending); err == nil {
			t.Errorf("%s -> pending allowed: capboxes are never retried", s)
		}
	}
	if err := api.CheckCapboxTransition(api.CapboxRunning, api.CapboxReleased); err != nil {
		t.Error(err)
	}
	if err := api.CheckCapboxTransition(api.CapboxReleased, api.CapboxRunning); !errors.Is(err, api.ErrBadTransition) {
		t.Errorf("released -> running: %v", err)
	}
}

func TestTaskStatesReachable(t *testing.T) {
	reach := reachable(api.TaskPending, func(s api.TaskState) []api.TaskState { return s.Next() })
	if len(reach) != len(api.TaskStates()) {
		t.Errorf("from pending only %v are reachable", reach)
	}
}

func reachable[S comparable](start S, next func(S) []S) []S {
	seen := []S{start}
	for i := 0; i < len(seen); i++ {
		for _, n := range next(seen[i]) {
			if !slices.Contains(seen, n) {
				seen = append(seen, n)
			}
		}
	}
	return seen
}

func TestStateText(t *testing.T) {
	for _, s := range api.TaskStates() {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back api.TaskState
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("task state %s: round trip gave %s, %v", s, back, err)
		}
	}
	for _, s := range api.CapboxStates() {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back api.CapboxState
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("capbox state %s: round trip gave %s, %v", s, back, err)
		}
	}
	if _, err := api.ParseTaskState("sleeping"); err == nil {
		t.Error("ParseTaskState accepted an unknown state")
	}
	if _, err := api.TaskState(99).MarshalText(); err == nil {
		t.Error("MarshalText accepted an invalid state")
	}
}
