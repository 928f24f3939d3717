package suite_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bench/schedbench"
	"github.com/sluicehq/sluice/bench/suite"
	"github.com/sluicehq/sluice/bench/suite/suitetest"
)

// TestRunOneScenario runs the sched scenario at a tiny size and reads its
// report back.
func TestRunOneScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a raftkv replica")
	}
	out := filepath.Join(t.TempDir(), "bench")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := suite.Run(ctx, suite.Config{
		Mode:   "test",
		Params: suite.Params{Sched: schedbench.Config{Nodes: 10, Tasks: 50, Replicas: 1, Seed: 1, Dir: t.TempDir()}},
		Out:    out, Only: []string{"sched"},
		Now: func() time.Time { return time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Sched == nil || s.Submit != nil || s.E2E != nil || s.Podstart != nil {
		t.Fatalf("suite %+v: want the sched report only", s)
	}
	r := s.Sched
	if r.Scenario != "sched" || r.Mode != "test" || r.Error != "" || r.Result.Tasks != 50 || r.Result.PlacementsPerSec <= 0 {
		t.Errorf("report %+v", r)
	}
	if !r.Time.Equal(time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)) || r.Seconds <= 0 {
		t.Errorf("time %v, seconds %v", r.Time, r.Seconds)
	}
	if m := r.Machine; m.CPUs != runtime.NumCPU() || m.GoVersion != runtime.Version() {
		t.Errorf("machine %+v", m)
	}
	entries, err := os.ReadDir(out)
	if err != nil || len(entries) != 1 || entries[0].Name() != "sched.json" {
		t.Fatalf("out dir: %v, %v: want sched.json only", entries, err)
	}
	loaded, err := suite.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(loaded.Sched, s.Sched) || loaded.Submit != nil {
		t.Errorf("loaded %+v\nwant %+v", loaded.Sched, s.Sched)
	}
}

// TestRunRecordsFailure: a scenario that fails still writes its report,
// with the error, and Run returns the error.
func TestRunRecordsFailure(t *testing.T) {
	out := t.TempDir()
	_, err := suite.Run(context.Background(), suite.Config{
		Params: suite.Params{Sched: schedbench.Config{Nodes: 0, Tasks: 1, Replicas: 1}}, // invalid: no nodes
		Out:    out, Only: []string{"sched"},
	})
	if err == nil {
		t.Fatal("want the sched error")
	}
	b, rerr := os.ReadFile(filepath.Join(out, "sched.json"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	var rep suite.Report[schedbench.Result]
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Error == "" || rep.Mode != "custom" {
		t.Errorf("report %+v: want the error and mode custom", rep)
	}
}

func TestConfigValidate(t *testing.T) {
	err := suite.Config{Only: []string{"sched", "nope"}}.Validate()
	if !errors.Is(err, suite.ErrUnknownScenario) {
		t.Errorf("err = %v, want ErrUnknownScenario", err)
	}
	if err := (suite.Config{Only: suite.Scenarios}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := suitetest.Suite()
	for name, rep := range map[string]any{"submit": s.Submit, "latency": s.Latency, "sched": s.Sched,
		"raftkv": s.Raftkv, "e2e": s.E2E, "soak": s.Soak, "podstart": s.Podstart, "overcommit": s.Overcommit,
		"overcommit-fleet": s.OvercommitFleet, "chaos": s.Chaos} {
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := suite.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("loaded\n%+v\nwant\n%+v", got, s)
	}
	if len(got.Outcomes()) != len(suite.Scenarios) {
		t.Errorf("outcomes %+v", got.Outcomes())
	}
	empty, err := suite.Load(t.TempDir())
	if err != nil || !reflect.DeepEqual(empty, suite.Suite{}) {
		t.Errorf("an empty dir: %+v, %v", empty, err)
	}
}

func TestQuickParamsValid(t *testing.T) {
	for _, p := range []suite.Params{suite.QuickParams(), suite.FullParams()} {
		for _, c := range p.Submit {
			if err := c.Validate(); err != nil {
				t.Error(err)
			}
		}
		if err := p.Latency.Validate(); err != nil {
			t.Error(err)
		}
		if err := p.Sched.Validate(); err != nil {
			t.Error(err)
		}
		for _, c := range p.Raftkv {
			if err := c.Validate(); err != nil {
				t.Error(err)
			}
		}
		if p.E2E.FleetProcs > 0 {
			p.E2E.FleetExec = "sluice" // what the CLI fills in: its own binary
		}
		if err := p.E2E.Validate(); err != nil {
			t.Error(err)
		}
		if p.Soak.FleetProcs > 0 {
			p.Soak.FleetExec = "sluice"
		}
		if err := p.Soak.Validate(); err != nil || p.Soak.Soak <= 0 {
			t.Errorf("the soak %+v: %v", p.Soak, err)
		}
		for _, c := range p.Podstart {
			if err := c.Validate(); err != nil {
				t.Error(err)
			}
		}
		if err := p.Overcommit.Validate(); err != nil {
			t.Error(err)
		}
		if p.OvercommitFleet.FleetProcs > 0 {
			p.OvercommitFleet.FleetExec = "sluice"
		}
		if err := p.OvercommitFleet.Validate(); err != nil {
			t.Error(err)
		}
		p.Chaos.Exe = "sluice" // what the CLI fills in: its own binary
		if err := p.Chaos.Validate(); err != nil {
			t.Error(err)
		}
	}
}

// TestChaosSkippedWithoutBinary: without the sluice binary to run the
// replicas, the chaos scenario writes a report that says so.
func TestChaosSkippedWithoutBinary(t *testing.T) {
	out := t.TempDir()
	s, err := suite.Run(context.Background(), suite.Config{Mode: "test", Out: out, Only: []string{"chaos"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Chaos == nil || !strings.Contains(s.Chaos.Skipped, "no sluice binary") {
		t.Fatalf("chaos report %+v: want it skipped for want of the binary", s.Chaos)
	}
	if _, err := os.Stat(filepath.Join(out, "chaos.json")); err != nil {
		t.Errorf("no chaos.json: %v", err)
	}
}
