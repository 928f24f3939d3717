package cgrouptest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/nodelet/cgroup"
	"golang.org/x/sys/unix"
)

// SpinEnv, when set in a test binary's environment, makes MaybeSpin burn
// CPU forever instead of running tests.
const SpinEnv = "SLUICE_CGROUPTEST_SPIN"

// MaybeSpin must be called first in TestMain of packages that use Spin: in
// a spinner child it never returns.
func MaybeSpin() {
	if os.Getenv(SpinEnv) == "" {
		return
	}
	x := uint64(1)
	for {
		x = x*6364136223846793005 + 1442695040888963407
		if x == 0 {
			fmt.Println(x)
		}
	}
}

// NewManager returns a Manager whose root is a fresh /sluice-test-<rand>,
// with both tiers created with no limits. It skips the test, saying why,
// unless it runs as root on a host with usable cgroups. When the test ends
// it kills any process left in the tree and deletes the tree from every
// hierarchy, failing the test if anything remains.
func NewManager(t testing.TB) *cgroup.Manager {
	t.Helper()
	return NewManagerMode(t, cgroup.ModeAuto)
}

// NewManagerMode is NewManager with the cgroup version forced to mode
// (ModeAuto detects it). For ModeV2 it skips the test unless the host has
// a cgroup2 mount (/sys/fs/cgroup itself, or /sys/fs/cgroup/unified beside
// v1 hierarchies); on a hybrid host that mount may offer no cpu or memory
// controller, and then only the settings it does offer can be written.
func NewManagerMode(t testing.TB, mode cgroup.Mode) *cgroup.Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: creating cgroups needs root (run the tests as root)")
	}
	if mode == cgroup.ModeV2 && !hasCgroup2() {
		t.Skip("skipping: no cgroup2 mount at /sys/fs/cgroup or /sys/fs/cgroup/unified")
	}
	root := fmt.Sprintf("/sluice-test-%d-%08x", os.Getpid(), rand.Uint32())
	m, err := cgroup.New(cgroup.Config{Root: root, Mode: mode})
	if err != nil {
		t.Skipf("skipping: no usable cgroups on this host: %v", err)
	}
	t.Cleanup(func() { destroy(t, m) })
	if err := m.EnsureTiers(cgroup.Limits{}, cgroup.Limits{}); err != nil {
		t.Fatalf("EnsureTiers: %v", err)
	}
	return m
}

func destroy(t testing.TB, m *cgroup.Manager) {
	for _, tier := range []cgroup.Tier{cgroup.Online, cgroup.Offline} {
		pods, _ := m.Pods(tier)
		for _, p := range pods {
			pids, _ := m.PodProcs(tier, p)
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; {
		err = m.Delete()
		if err == nil || errors.Is(err, cgroup.ErrNotFound) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil && !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("cleanup: delete %s: %v", m.Root(), err)
	}
	if left := Leftovers(m.Root()); len(left) > 0 {
		t.Errorf("cleanup: %s still present in %v", m.Root(), left)
	}
}

func hasCgroup2() bool {
	for _, p := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(p, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return true
		}
	}
	return false
}

// Leftovers lists the hierarchy directories under /sys/fs/cgroup in which
// the cgroup path p still exists.
func Leftovers(p string) []string {
	var out []string
	cands, _ := filepath.Glob("/sys/fs/cgroup/*")
	cands = append(cands, "/sys/fs/cgroup")
	for _, h := range cands {
		if st, err := os.Stat(filepath.Join(h, p)); err == nil && st.IsDir() {
			out = append(out, h)
		}
	}
	return out
}

// Spin starts a child that burns one CPU (the test binary re-executed with
// SpinEnv set; the package's TestMain must call MaybeSpin) and moves it
// into the pod's cgroup. The child is killed when the test ends.
func Spin(t testing.TB, m *cgroup.Manager, tier cgroup.Tier, pod string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), SpinEnv+"=1", "GOMAXPROCS=1")
	return Start(t, m, tier, pod, cmd)
}

// Start starts cmd and moves it into the pod's cgroup. The process is
// killed and reaped when the test ends.
func Start(t testing.TB, m *cgroup.Manager, tier cgroup.Tier, pod string, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", cmd.Args, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if err := m.AddProc(tier, pod, cmd.Process.Pid); err != nil {
		t.Fatalf("AddProc %d: %v", cmd.Process.Pid, err)
	}
	return cmd
}
