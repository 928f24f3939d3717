package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/bench/overcommitbench"
)

// fleetCmd is a command with the fleet mode's flags, run as the
// overcommit command runs it.
func fleetCmd(asJSON bool) *cobra.Command {
	var f overcommitFleetFlags
	c := &cobra.Command{Use: "overcommit", RunE: func(c *cobra.Command, _ []string) error {
		return runBenchOvercommitFleet(c, &f, asJSON, true)
	}}
	f.addTo(c)
	return c
}

// TestBenchOvercommitFleetRefusals: bad flags are usage errors, named.
func TestBenchOvercommitFleetRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fleet", "--fleet-node-cpu", "lots"}, "--fleet-node-cpu"},
		{[]string{"--fleet", "--fleet-online-share", "2"}, "OnlineShare 2"},
		{[]string{"--fleet", "--fleet-peak", "5m", "--fleet-period", "4m"}, "PeakLength 5m0s"},
	} {
		cmd := fleetCmd(false)
		cmd.SetArgs(c.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		err := cmd.Execute()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want a usage error about %s", c.args, err, c.want)
		}
	}
}

// TestBenchOvercommitFleetHelp: the command's help tells of the mode.
func TestBenchOvercommitFleetHelp(t *testing.T) {
	c := fleetCmd(false)
	if !strings.Contains(c.Long, "With --fleet") || !strings.Contains(c.Example, "--fleet-procs") || c.Flags().Lookup("fleet-heartbeat") == nil {
		t.Errorf("help %q, example %q", c.Long, c.Example)
	}
}

// TestPrintOvercommitFleet: the table names each shift and the summary;
// with --json the last line is the result with the contract's fields.
func TestPrintOvercommitFleet(t *testing.T) {
	r := overcommitbench.FleetResult{Nodes: 10000, Replicas: 1, CapacityCPU: 80_000_000, HeartbeatSeconds: 10, PeriodSeconds: 240, PeakSeconds: 120,
		AllocationRatio: 1.25, Utilization: 0.61, AllocationRatioOffPeak: 1.31, AllocationRatioPeak: 1.06, FollowUpSeconds: 33.2, FollowDownSeconds: -1,
		Series:            []overcommitbench.FleetSample{{T: 1, AllocationRatio: 1.2}},
		Shifts:            []overcommitbench.FleetShift{{T: 100, Up: true, Before: 1.3, After: 1.06, FollowSeconds: 33.2, Complete: true}, {T: 220, Before: 1.06, After: 1.2, FollowSeconds: -1}},
		MinEstimatedNodes: 7}
	var out bytes.Buffer
	if err := printOvercommitFleet(&out, r, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"as few as 7 of 10000", "10000 simulated nodes (80000 cores)", "rises", "106.0%", "34 s up", "did not settle", "cut by the end", "allocation ratio 125.0%"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := printOvercommitFleet(&out, r, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"allocation_ratio", "utilization", "series", "shifts", "follow_up_seconds", "follow_down_seconds"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, lines[len(lines)-1])
		}
	}
}
