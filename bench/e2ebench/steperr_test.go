package e2ebench

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestStepErr: a step whose context ended (a fleet process exited) fails
// with the cause, even when its Driver returned no error or only the
// context's.
func TestStepErr(t *testing.T) {
	exited := errors.New("fleet process 2 (3333 nodes) exited early: signal: killed")
	ended, cancel := context.WithCancelCause(context.Background())
	cancel(exited)
	live := context.Background()
	driverErr := errors.New("submit: bad request")
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want error
	}{
		{"live, no error", live, nil, nil},
		{"live, the driver's error", live, driverErr, driverErr},
		{"ended, no error", ended, nil, exited},
		{"ended, the context's error", ended, context.Canceled, exited},
	} {
		if got := stepErr(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: stepErr = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFleetEnv: a fleet process's environment is this one's with its own
// GOMEMLIMIT, replacing any inherited; without a limit, this one's.
func TestFleetEnv(t *testing.T) {
	env := []string{"HOME=/root", "GOMEMLIMIT=20GiB", "GOGC=400"}
	if got := fleetEnv(env, 0); !slices.Equal(got, env) {
		t.Errorf("no limit: %q, want %q", got, env)
	}
	want := []string{"HOME=/root", "GOGC=400", "GOMEMLIMIT=4831838208"}
	if got := fleetEnv(env, 4831838208); !slices.Equal(got, want) {
		t.Errorf("4.5 GiB: %q, want %q", got, want)
	}
	if env[1] != "GOMEMLIMIT=20GiB" {
		t.Errorf("fleetEnv changed its argument: %q", env)
	}
}
