package nodelet_test

import (
	"bufio"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// vmRSS returns the process's resident set size in bytes.
func vmRSS(t testing.TB) int64 { return procRSS(t, "self") }

// procRSS is the VmRSS of process pid ("self" for this one), in bytes.
func procRSS(t testing.TB, pid string) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		t.Skipf("no /proc/%s/status: %v", pid, err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%s/status", pid)
	return 0
}

// TestAgentRSSWith100Pods runs the agent with 100 running pods (sim
// runtime) and checks the whole test process stays under 30 MB resident
// (the nodelet target; skipped under -race, which multiplies memory).
func TestAgentRSSWith100Pods(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	h := newHarness(t, host, d, nil)
	var desired []nodelet.DesiredPod
	for i := range 100 {
		desired = append(desired, simPod(fmt.Sprintf("rss-%03d", i), 1, 0, 0))
	}
	d.setTarget(1, desired...)
	eventually(t, 10*time.Second, "100 pods running", func() bool {
		s := h.agent.Stats()
		return s.Running == 100 && s.PendingReports == 0
	})
	goruntime.GC()
	debug.FreeOSMemory()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	rss := vmRSS(t)
	t.Logf("100 running pods: VmRSS %.1f MB, Go heap in use %.1f MB, sys %.1f MB, goroutines %d",
		float64(rss)/(1<<20), float64(ms.HeapInuse)/(1<<20), float64(ms.Sys)/(1<<20), goruntime.NumGoroutine())
	if raceEnabled {
		t.Skip("RSS target not checked under -race")
	}
	if rss > 30<<20 {
		t.Errorf("VmRSS %d MB > 30 MB target", rss>>20)
	}
}
