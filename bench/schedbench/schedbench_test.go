package schedbench

import (
	"context"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	res, err := Run(context.Background(), Config{Nodes: 20, Tasks: 2000, Replicas: 1, Seed: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Tasks != 2000 || res.Jobs == 0 || res.PlacementsPerSec <= 0 || res.Rounds == 0 || res.RoundP99Ms < res.RoundP50Ms {
		t.Fatalf("result %+v", res)
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{Replicas: 9, Timeout: -1}.Validate()
	for _, want := range []string{"nodes 0", "tasks 0", "replicas 9", "timeout -1ns"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v: want it to name %q", err, want)
		}
	}
}

func TestWorkloadHoldsTheTasks(t *testing.T) {
	var n int64
	for _, s := range workload(7, 12345) {
		n += s.Tasks[0].Count
	}
	if n != 12345 {
		t.Fatalf("workload holds %d tasks, want 12345", n)
	}
}
