package fleet_test

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/bench/fleet"
)

// TestProcEnv: a fleet process's environment is this one's with its own
// GOMEMLIMIT, replacing any inherited; without a limit, this one's.
func TestProcEnv(t *testing.T) {
	env := []string{"HOME=/root", "GOMEMLIMIT=20GiB", "GOGC=400"}
	if got := fleet.ProcEnv(env, 0); !slices.Equal(got, env) {
		t.Errorf("no limit: %q, want %q", got, env)
	}
	want := []string{"HOME=/root", "GOGC=400", "GOMEMLIMIT=4831838208"}
	if got := fleet.ProcEnv(env, 4831838208); !slices.Equal(got, want) {
		t.Errorf("4.5 GiB: %q, want %q", got, want)
	}
	if env[1] != "GOMEMLIMIT=20GiB" {
		t.Errorf("ProcEnv changed its argument: %q", env)
	}
}
