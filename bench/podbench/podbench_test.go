package podbench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/nodelet/runtime/container"
	"golang.org/x/sys/unix"
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
	// The state tmpfs is gone: the mount point is on the work directory's
	// own file system again. (Stat, not /proc/self/mountinfo: that shows
	// the thread group leader's mount namespace, which libcontainer's
	// work in this process may have changed.)
	var dirSt, runSt unix.Stat_t
	if err := unix.Stat(work, &dirSt); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Join(work, "run"), &runSt); err != nil {
		t.Fatal(err)
	}
	if runSt.Dev != dirSt.Dev {
		t.Errorf("%s is still a mount point after the run", filepath.Join(work, "run"))
	}
	left, err := os.ReadDir(filepath.Join(work, "run"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the state mount point holds %d entries after the run, want none", len(left))
	}
}
