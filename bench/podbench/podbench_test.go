package podbench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/nodelet/runtime/container"
)

func TestMain(m *testing.M) {
	container.Reexec()
	os.Exit(m.Run())
}

// TestRunLeavesNothing runs a small measurement with the container
// runtime and checks its figures, and that the state tmpfs is unmounted
// and the pods' state gone afterwards.
func TestRunLeavesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: containers need namespaces and cgroups")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	work := t.TempDir()
	res, err := Run(ctx, Config{Pods: 3, Concurrency: 2, NoRunc: true, WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pods != 3 || res.Sluice.StartsPerSec <= 0 || res.Sluice.P50Ms <= 0 || res.Sluice.P99Ms < res.Sluice.P50Ms {
		t.Errorf("result %+v: want 3 pods with positive starts/s and p50 ≤ p99", res)
	}
	if res.Runc != nil || res.RuncSkipped != "disabled" {
		t.Errorf("runc side %+v (%q): want it skipped as disabled", res.Runc, res.RuncSkipped)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), work) {
		t.Errorf("a mount under the work directory %s is left:\n%s", work, mounts)
	}
	left, err := os.ReadDir(filepath.Join(work, "run"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the state mount point holds %d entries after the run, want none", len(left))
	}
}
