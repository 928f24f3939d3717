package overcommit_test

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/overcommit"
)

// TestScripts runs the recorded sample sequences in testdata/*.txt. Each
// file is a list of commands:
//
//	params k=v...                  new controller (see paramKeys)
//	host cpu=USED/CAP mem=AVAIL/TOTAL
//	pod id=ID tier=online|offline prio=N start=DUR req=CPU/MEM use=CPU/MEM
//	drop ID
//	step t=DUR                     Step at epoch+DUR with the current host and pods
//	expect k=v...                  check the last decision (see check)
//	reason ID SUBSTRING            the last decision kills ID with a reason containing SUBSTRING
//
// Sizes take K, M, G suffixes (powers of 1024).
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func runScript(t *testing.T, file string) {
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var (
		ctl  *overcommit.Controller
		host overcommit.HostSample
		pods []overcommit.PodSample
		d    overcommit.Decision
	)
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		where := fmt.Sprintf("%s:%d: %s", file, n, line)
		cmd, rest, _ := strings.Cut(line, " ")
		kv := fields(t, where, rest)
		switch cmd {
		case "params":
			ctl = newController(t, where, kv)
		case "host":
			host.CPUUsedMillis, host.CPUCapacityMillis = pair(t, where, kv["cpu"])
			host.MemAvailable, host.MemTotal = pair(t, where, kv["mem"])
		case "pod":
			p := overcommit.PodSample{ID: kv["id"], Tier: cgroup.Tier(kv["tier"])}
			p.Priority = int(num(t, where, kv["prio"]))
			p.StartedAt = epoch.Add(dur(t, where, kv["start"]))
			p.Request.CPUMillis, p.Request.MemoryBytes = pair(t, where, kv["req"])
			p.CPUUsedMillis, p.MemoryBytes = pair(t, where, kv["use"])
			i := slices.IndexFunc(pods, func(q overcommit.PodSample) bool { return q.ID == p.ID })
			if i >= 0 {
				pods[i] = p
			} else {
				pods = append(pods, p)
			}
		case "drop":
			pods = slices.DeleteFunc(pods, func(q overcommit.PodSample) bool { return q.ID == rest })
		case "step":
			if ctl == nil {
				t.Fatalf("%s: step before params", where)
			}
			d = ctl.Step(epoch.Add(dur(t, where, kv["t"])), host, pods)
			for _, k := range d.Kills {
				if i := slices.IndexFunc(pods, func(q overcommit.PodSample) bool { return q.ID == k.ID }); i < 0 || pods[i].Tier != cgroup.Offline {
					t.Errorf("%s: killed %s, which is not an offline pod", where, k.ID)
				}
			}
		case "expect":
			for k, v := range kv {
				if got := observe(t, where, d, k); got != norm(t, where, k, v) {
					t.Errorf("%s: %s = %s, want %s", where, k, got, v)
				}
			}
		case "reason":
			id, sub, _ := strings.Cut(rest, " ")
			i := slices.IndexFunc(d.Kills, func(k overcommit.Kill) bool { return k.ID == id })
			if i < 0 || !strings.Contains(d.Kills[i].Reason, sub) {
				t.Errorf("%s: kills %+v", where, d.Kills)
			}
		default:
			t.Fatalf("%s: unknown command %q", where, cmd)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func fields(t *testing.T, where, s string) map[string]string {
	kv := map[string]string{}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if ok {
			kv[k] = v
		}
	}
	return kv
}

func num(t *testing.T, where, s string) int64 {
	t.Helper()
	if s == "" {
		return 0
	}
	mul := int64(1)
	switch s[len(s)-1] {
	case 'K':
		mul = 1 << 10
	case 'M':
		mul = 1 << 20
	case 'G':
		mul = 1 << 30
	}
	if mul != 1 {
		s = s[:len(s)-1]
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%s: %q: %v", where, s, err)
	}
	return int64(math.Round(f * float64(mul)))
}

func pair(t *testing.T, where, s string) (int64, int64) {
	t.Helper()
	a, b, _ := strings.Cut(s, "/")
	return num(t, where, a), num(t, where, b)
}

func dur(t *testing.T, where, s string) time.Duration {
	t.Helper()
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	return d
}

func newController(t *testing.T, where string, kv map[string]string) *overcommit.Controller {
	t.Helper()
	var p overcommit.Params
	for k, v := range kv {
		f := func() float64 {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %s: %v", where, k, err)
			}
			return x
		}
		switch k {
		case "cpu-watermark":
			p.CPUWatermark = f()
		case "cpu-deadband":
			p.CPUDeadband = f()
		case "cpu-min":
			p.OfflineCPUMinMillis = num(t, where, v)
		case "cpu-max":
			p.OfflineCPUMaxMillis = num(t, where, v)
		case "cpu-init":
			p.OfflineCPUInitMillis = num(t, where, v)
		case "grow-factor":
			p.CPUGrowFactor = f()
		case "grow-step":
			p.CPUGrowStepMillis = num(t, where, v)
		case "shrink-factor":
			p.CPUShrinkFactor = f()
		case "mem-watermark":
			p.MemWatermark = f()
		case "mem-guaranteed":
			p.OfflineMemGuaranteedBytes = num(t, where, v)
		case "lend-ratio":
			p.MemLendRatio = f()
		case "lend-knee":
			p.MemLendKnee = f()
		case "lend-ratio-above":
			p.MemLendRatioAbove = f()
		case "kill-free":
			p.KillFreeFraction = f()
		case "kill-grace":
			p.KillGrace = dur(t, where, v)
		case "alpha":
			p.EWMAAlpha = f()
		default:
			t.Fatalf("%s: unknown param %q", where, k)
		}
	}
	c, err := overcommit.New(p)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	return c
}

// norm puts an expected value in the form observe prints.
func norm(t *testing.T, where, k, v string) string {
	switch {
	case k == "action" || k == "kills" || k == "pressure" || k == "unrelieved" || k == "report" || v == "absent":
		return v
	case k == "util" || k == "ratio":
		x, _ := strconv.ParseFloat(v, 64)
		return strconv.FormatFloat(x, 'f', 3, 64)
	case strings.Contains(v, "/"):
		a, b := pair(t, where, v)
		return fmt.Sprintf("%d/%d", a, b)
	}
	return strconv.FormatInt(num(t, where, v), 10)
}

// observe prints one fact of a decision:
//
//	action quota min max util            CPU rule
//	idle lendable ratio mem-limit guaranteed threshold pressure unrelieved
//	kills                                comma-separated, "-" for none
//	g.ID l.ID                            offline pod guaranteed / limit as CPU/MEM
//	ewma.ID                              pod report as CPU/MEM; ewma.online, ewma.offline for tiers
//	report                               pod IDs in the report
func observe(t *testing.T, where string, d overcommit.Decision, k string) string {
	t.Helper()
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	switch k {
	case "action":
		return d.CPU.Action.String()
	case "quota":
		return i64(d.CPU.OfflineQuotaMillis)
	case "min":
		return i64(d.CPU.MinMillis)
	case "max":
		return i64(d.CPU.MaxMillis)
	case "util":
		return strconv.FormatFloat(d.CPU.Util, 'f', 3, 64)
	case "idle":
		return i64(d.Memory.OnlineIdleBytes)
	case "lendable":
		return i64(d.Memory.LendableBytes)
	case "ratio":
		return strconv.FormatFloat(d.Memory.BorrowRatio, 'f', 3, 64)
	case "mem-limit":
		return i64(d.Memory.OfflineLimitBytes)
	case "guaranteed":
		return i64(d.Memory.GuaranteedBytes)
	case "threshold":
		return i64(d.Memory.KillThresholdBytes)
	case "pressure":
		if d.Memory.PressureSince.IsZero() {
			return "none"
		}
		return d.Memory.PressureSince.Sub(epoch).String()
	case "unrelieved":
		return strconv.FormatBool(d.Memory.UnrelievedByKilling)
	case "kills":
		if len(d.Kills) == 0 {
			return "-"
		}
		var ids []string
		for _, k := range d.Kills {
			ids = append(ids, k.ID)
		}
		return strings.Join(ids, ",")
	case "report":
		var ids []string
		for _, p := range d.Report.Pods {
			ids = append(ids, p.ID)
		}
		return strings.Join(ids, ",")
	}
	kind, id, ok := strings.Cut(k, ".")
	if !ok {
		t.Fatalf("%s: unknown key %q", where, k)
	}
	switch kind {
	case "g", "l":
		for _, p := range d.Pods {
			if p.ID == id {
				r := p.Guaranteed
				if kind == "l" {
					r = p.Limit
				}
				return fmt.Sprintf("%d/%d", r.CPUMillis, r.MemoryBytes)
			}
		}
		return "absent"
	case "ewma":
		u, found := d.Report.Online, id == "online"
		if id == "offline" {
			u, found = d.Report.Offline, true
		}
		for _, p := range d.Report.Pods {
			if p.ID == id {
				u, found = p.Usage, true
			}
		}
		if !found {
			return "absent"
		}
		return fmt.Sprintf("%d/%d", u.CPUMillis, u.MemoryBytes)
	}
	t.Fatalf("%s: unknown key %q", where, k)
	return ""
}
