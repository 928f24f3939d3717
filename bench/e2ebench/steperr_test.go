package e2ebench

import (
	"context"
	"errors"
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
