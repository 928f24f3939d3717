package suite

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/bench/chaosbench"
	"github.com/sluicehq/sluice/bench/e2ebench"
	"github.com/sluicehq/sluice/bench/overcommitbench"
	"github.com/sluicehq/sluice/bench/podbench"
	"github.com/sluicehq/sluice/bench/schedbench"
	"github.com/sluicehq/sluice/bench/storebench"
	"github.com/sluicehq/sluice/bench/submitbench"
)

// The markers around the generated section of a document; UpdateDoc
// replaces what lies between them.
const (
	BeginMarker = "<!-- bench-suite:begin -->"
	EndMarker   = "<!-- bench-suite:end -->"
)

// ErrMarkers says a document lacks the generated section's markers (or
// has them more than once, or out of order).
var ErrMarkers = errors.New("bench suite: document needs exactly one " + BeginMarker + " followed by one " + EndMarker)

// UpdateDoc replaces the text between BeginMarker and EndMarker in the
// file at path with generated, leaving everything else as it was.
func UpdateDoc(path, generated string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("bench suite: update doc: %w", err)
	}
	out, err := ReplaceSection(b, generated)
	if err != nil {
		return fmt.Errorf("%w (in %s)", err, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("bench suite: update doc: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("bench suite: update doc: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("bench suite: update doc: %w", err)
	}
	return nil
}

// ReplaceSection returns doc with the text between its markers replaced by
// generated (which gets a newline of its own on each side).
func ReplaceSection(doc []byte, generated string) ([]byte, error) {
	begin, end := []byte(BeginMarker), []byte(EndMarker)
	if bytes.Count(doc, begin) != 1 || bytes.Count(doc, end) != 1 {
		return nil, ErrMarkers
	}
	i := bytes.Index(doc, begin) + len(begin)
	j := bytes.Index(doc, end)
	if j < i {
		return nil, ErrMarkers
	}
	var out bytes.Buffer
	out.Write(doc[:i])
	out.WriteString("\n" + strings.TrimSpace(generated) + "\n")
	out.Write(doc[j:])
	return out.Bytes(), nil
}

// Markdown renders s as the generated section: a caption for the machine,
// a table of the sizes each scenario ran at, a table per scenario with a
// line saying at which sizes, when and how it ran, and the charts as
// images under linkDir (a path relative to the document). The sizes are
// stated everywhere because a quick run's figures (make bench) are far
// below the full sizes' and must not be read as them.
func Markdown(s Suite, charts []Chart, linkDir string) string {
	var b strings.Builder
	if m, ok := firstMachine(s); ok {
		fmt.Fprintf(&b, "_Machine of the last run: %d × %s, Linux %s, %s._\n\n", m.CPUs, orUnknown(m.CPUModel), orUnknown(m.Kernel), m.GoVersion)
	}
	sizesTable(&b, s)
	if s.Submit != nil {
		section(&b, "submit: jobs committed/s through the HTTP API", s.Submit.caption(submitSizes(s.Submit.Result)), s.Submit.Skipped, s.Submit.Notes, s.Submit.Error)
		submitTable(&b, s.Submit.Result)
	}
	if s.Latency != nil {
		section(&b, "latency: one task, submit → running", s.Latency.caption(latencySizes(s.Latency.Result)), s.Latency.Skipped, s.Latency.Notes, s.Latency.Error)
		latencyTable(&b, s.Latency.Result)
	}
	if s.Sched != nil {
		section(&b, "sched: the scheduling loop", s.Sched.caption(schedSizes(s.Sched.Result)), s.Sched.Skipped, s.Sched.Notes, s.Sched.Error)
		if r := s.Sched.Result; r.Tasks > 0 {
			table(&b, []string{"nodes", "tasks (jobs)", "placements/s", "round p50 / p99", "placement share of round", "heap per pending task"},
				[]string{Count(float64(r.Nodes)), fmt.Sprintf("%s (%s)", Count(float64(r.Tasks)), Count(float64(r.Jobs))),
					"**" + Count(r.PlacementsPerSec) + "**", msPair(r.RoundP50Ms, r.RoundP99Ms),
					fmt.Sprintf("%.0f%%", 100*r.SolverShare), fmt.Sprintf("%.1f B", r.BytesPerPendingTask)})
			if full := FullParams().Sched; r.Nodes != full.Nodes || r.Tasks != full.Tasks {
				fmt.Fprintf(&b, "Run at %s nodes × %s tasks, not the full size's %s × %s: compare it only with runs of the same size.\n\n",
					Count(float64(r.Nodes)), Count(float64(r.Tasks)), Count(float64(full.Nodes)), Count(float64(full.Tasks)))
			}
			b.WriteString(publishedAnchors)
		}
	}
	if s.Raftkv != nil {
		section(&b, "raftkv: the replicated store against etcd", s.Raftkv.caption(raftkvSizes(s.Raftkv.Result)), s.Raftkv.Skipped, s.Raftkv.Notes, s.Raftkv.Error)
		raftkvTable(&b, s.Raftkv.Result)
	}
	if s.E2E != nil {
		section(&b, "e2e: stepped offered rate, submit → placed → running", s.E2E.caption(e2eSizes(s.E2E.Result)), s.E2E.Skipped, s.E2E.Notes, s.E2E.Error)
		e2eTable(&b, s)
	}
	if s.Soak != nil {
		section(&b, "soak: one rate held, row by row", s.Soak.caption(soakSizes(s.Soak.Result)), s.Soak.Skipped, s.Soak.Notes, s.Soak.Error)
		soakTable(&b, s.Soak.Result)
	}
	if s.Podstart != nil {
		section(&b, "podstart: pod starts against runc", s.Podstart.caption(podstartSizes(s.Podstart.Result)), s.Podstart.Skipped, s.Podstart.Notes, s.Podstart.Error)
		if len(s.Podstart.Result) > 0 {
			var rows [][]string
			for _, r := range s.Podstart.Result {
				runcLat, runcRate := "—", "—"
				if r.Runc != nil {
					runcLat, runcRate = msPair(r.Runc.P50Ms, r.Runc.P99Ms), fmt.Sprintf("%.1f", r.Runc.StartsPerSec)
				}
				rows = append(rows, []string{strconv.Itoa(r.Concurrency), strconv.Itoa(r.Pods), msPair(r.Sluice.P50Ms, r.Sluice.P99Ms),
					runcLat, fmt.Sprintf("%.1f", r.Sluice.StartsPerSec), runcRate})
			}
			table(&b, []string{"concurrency", "pods", "sluice p50 / p99", "runc p50 / p99", "sluice starts/s", "runc starts/s"}, rows...)
		}
	}
	if s.Overcommit != nil {
		section(&b, "overcommit: online and offline pods on real containers", s.Overcommit.caption(overcommitSizes(s.Overcommit.Result)), s.Overcommit.Skipped, s.Overcommit.Notes, s.Overcommit.Error)
		overcommitTable(&b, s.Overcommit.Result)
	}
	if s.OvercommitFleet != nil {
		section(&b, "overcommit at fleet scale: simulated nodes reporting usage", s.OvercommitFleet.caption(overcommitFleetSizes(s.OvercommitFleet.Result)), s.OvercommitFleet.Skipped, s.OvercommitFleet.Notes, s.OvercommitFleet.Error)
		overcommitFleetTable(&b, s.OvercommitFleet.Result)
	}
	if s.Chaos != nil {
		section(&b, "chaos: faults across real processes", s.Chaos.caption(chaosSizes(s.Chaos.Result)), s.Chaos.Skipped, s.Chaos.Notes, s.Chaos.Error)
		if r := s.Chaos.Result; r.Faults > 0 {
			chaosTable(&b, r)
		}
	}
	if len(charts) > 0 {
		b.WriteString("#### Plots\n\n")
		for _, c := range charts {
			fmt.Fprintf(&b, "![%s](%s)\n", c.Title, path.Join(filepath.ToSlash(linkDir), c.File))
		}
	}
	return b.String()
}

// caption says at which sizes (as sizes words them), how and when the
// report's scenario ran.
func (r *Report[R]) caption(sizes string) string {
	head := r.Mode + " run"
	if r.Skipped == "" && sizes != "" {
		head += ": " + sizes
	}
	parts := []string{r.Time.UTC().Format("2006-01-02 15:04 MST"), fmt.Sprintf("%s s", trim(r.Seconds))}
	if r.Machine.LoadAvg != "" {
		parts = append(parts, "load "+r.Machine.LoadAvg)
	}
	if c := r.Machine.Commit; c != "" {
		c = c[:min(len(c), 10)]
		if r.Machine.Modified {
			c += " (modified)"
		}
		parts = append(parts, "commit "+c)
	}
	return head + "; " + strings.Join(parts, ", ")
}

// sizesTable writes which run (quick, full) each scenario's report comes
// from and at which sizes it ran, then the full run's sizes of the
// scenarios whose figures depend most on them.
func sizesTable(b *strings.Builder, s Suite) {
	var rows [][]string
	add := func(name, mode, skipped, sizes string) {
		if skipped != "" {
			sizes = "skipped"
		}
		rows = append(rows, []string{name, mode, sizes})
	}
	if r := s.Submit; r != nil {
		add(r.Scenario, r.Mode, r.Skipped, submitSizes(r.Result))
	}
	if r := s.Latency; r != nil {
		add(r.Scenario, r.Mode, r.Skipped, latencySizes(r.Result))
	}
	if r := s.Sched; r != nil {
		add(r.Scenario, r.Mode, r.Skipped, schedSizes(r.Result))
	}
	if r := s.Raftkv; r != nil {
		add(r.Scenario, r.Mode, r.Skipped, raftkvSizes(r.Result))
	}
	if r := s.E2E; r != nil {
		add(r.Scenario, r.Mode, r.Skipped, e2eSizes(r.Result))
	}
	if r := s.Soak; r != nil {
		add(r.Scenario, r.Mode, r.Skipped, soakSizes(r.Result))
	}
	if r := s.Podstart; r != nil {
		add(r.Scenario, r.Mode, r.Skipped, podstartSizes(r.Result))
	}
	if r := s.Overcommit; r != nil {
		add(r.Scenario, r.Mode, r.Skipped, overcommitSizes(r.Result))
	}
	if r := s.OvercommitFleet; r != nil {
		add(r.Scenario, r.Mode, r.Skipped, overcommitFleetSizes(r.Result))
	}
	if r := s.Chaos; r != nil {
		add(r.Scenario, r.Mode, r.Skipped, chaosSizes(r.Result))
	}
	if len(rows) == 0 {
		return
	}
	table(b, []string{"scenario", "run", "sizes"}, rows...)
	full := FullParams()
	fmt.Fprintf(b, "A quick run (`make bench`) is small and single: it shows trends and regressions of several times, not the targets' figures. "+
		"The full run's sizes: e2e at %s simulated nodes, the soak %s tasks/s for %s at %s nodes, sched %s nodes × %s tasks.\n\n",
		Count(float64(full.E2E.Nodes)), Count(full.Soak.StartRate), full.Soak.Soak, Count(float64(full.Soak.Nodes)),
		Count(float64(full.Sched.Nodes)), Count(float64(full.Sched.Tasks)))
}

func submitSizes(rs []submitbench.Result) string {
	if len(rs) == 0 {
		return ""
	}
	r := rs[0]
	return fmt.Sprintf("%s jobs an encoding in requests of %s, %d clients", Count(float64(r.Jobs)), Count(float64(r.JobsPerRequest)), r.Clients)
}

func latencySizes(r submitbench.LatencyResult) string {
	if r.Samples == 0 {
		return ""
	}
	return fmt.Sprintf("%d samples, %d simulated nodes", r.Samples, r.Nodes)
}

func schedSizes(r schedbench.Result) string {
	if r.Tasks == 0 {
		return ""
	}
	return fmt.Sprintf("%s nodes × %s tasks", Count(float64(r.Nodes)), Count(float64(r.Tasks)))
}

func raftkvSizes(cs []storebench.Comparison) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%d writers × %s", c.Writers, ByteSize(c.ValueBytes)))
	}
	return strings.Join(parts, ", ")
}

func e2eSizes(r e2ebench.Result) string {
	if len(r.Steps) == 0 {
		return ""
	}
	first, last := r.Steps[0], r.Steps[len(r.Steps)-1]
	return fmt.Sprintf("%s simulated nodes, %d steps of %s, %s to %s tasks/s offered", Count(float64(r.Nodes)), len(r.Steps),
		time.Duration(r.StepSeconds*float64(time.Second)), Count(first.TargetTasksPerSec), Count(last.TargetTasksPerSec))
}

func soakSizes(r e2ebench.SoakResult) string {
	if len(r.Rows) == 0 {
		return ""
	}
	return fmt.Sprintf("%s simulated nodes, %s tasks/s for %s", Count(float64(r.Nodes)), Count(r.TargetTasksPerSec),
		time.Duration(r.SoakSeconds*float64(time.Second)))
}

func podstartSizes(rs []podbench.Result) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%d pods at %d in flight", r.Pods, r.Concurrency))
	}
	return strings.Join(parts, ", ")
}

func overcommitSizes(r overcommitbench.Result) string {
	if r.ProbeRequests == 0 {
		return ""
	}
	return fmt.Sprintf("one real node, %s probe requests", Count(float64(r.ProbeRequests)))
}

func overcommitFleetSizes(r overcommitbench.FleetResult) string {
	if r.Nodes == 0 {
		return ""
	}
	return fmt.Sprintf("%s simulated nodes", Count(float64(r.Nodes)))
}

func chaosSizes(r chaosbench.Result) string {
	if r.Faults == 0 {
		return ""
	}
	return fmt.Sprintf("%d faults, %s operations", r.Faults, Count(float64(r.Ops)))
}

func section(b *strings.Builder, title, caption, skipped string, notes []string, errText string) {
	fmt.Fprintf(b, "#### %s\n\n_%s_\n\n", title, caption)
	if skipped != "" {
		fmt.Fprintf(b, "Skipped: %s.\n\n", skipped)
	}
	for _, n := range notes {
		fmt.Fprintf(b, "Note: %s.\n\n", n)
	}
	if errText != "" {
		fmt.Fprintf(b, "**Failed:** %s\n\n", oneLine(errText))
	}
}

func submitTable(b *strings.Builder, rs []submitbench.Result) {
	if len(rs) == 0 {
		return
	}
	var rows [][]string
	for _, r := range rs {
		rows = append(rows, []string{EncodingName(r.Encoding), "**" + Count(r.JobsPerSec) + "**", msPair(r.P50Ms, r.P99Ms),
			Count(float64(r.Jobs))})
	}
	fmt.Fprintf(b, "%d replicas, %d clients, %s jobs per request (a %s JSON body; the client compresses each request when encoded).\n\n",
		rs[0].Replicas, rs[0].Clients, Count(float64(rs[0].JobsPerRequest)), kb(rs[0].BodyBytes))
	table(b, []string{"encoding", "jobs committed/s", "request p50 / p99", "jobs"}, rows...)
}

func latencyTable(b *strings.Builder, r submitbench.LatencyResult) {
	if r.Samples == 0 {
		return
	}
	table(b, []string{"samples", "simulated nodes", "p50", "p99", "max"},
		[]string{strconv.Itoa(r.Samples), strconv.Itoa(r.Nodes), ms(r.P50Ms), "**" + ms(r.P99Ms) + "**", ms(r.MaxMs)})
}

func raftkvTable(b *strings.Builder, cs []storebench.Comparison) {
	if len(cs) == 0 {
		return
	}
	rate := func(x storebench.Result, valueBytes int) string {
		s := Count(x.WritesPerSec)
		if valueBytes >= 64<<10 {
			s += fmt.Sprintf(" (%.1f MB/s)", x.MBPerSec)
		}
		return s
	}
	var rows [][]string
	failover := false
	for _, c := range cs {
		etcd, etcdLat, ratio := "—", "—", "—"
		if c.Etcd != nil {
			etcd, etcdLat = rate(*c.Etcd, c.ValueBytes), msPair(c.Etcd.P50Ms, c.Etcd.P99Ms)
			if c.Etcd.WritesPerSec > 0 {
				ratio = fmt.Sprintf("**%.1f×**", c.Sluice.WritesPerSec/c.Etcd.WritesPerSec)
			}
		}
		rows = append(rows, []string{strconv.Itoa(c.Writers), ByteSize(c.ValueBytes), rate(c.Sluice, c.ValueBytes),
			msPair(c.Sluice.P50Ms, c.Sluice.P99Ms), etcd, etcdLat, ratio})
		failover = failover || c.FailoverMs > 0
	}
	fmt.Fprintf(b, "%d replicas (and etcd members) on loopback, fsync on.\n\n", cs[0].Replicas)
	table(b, []string{"writers", "value", "Sluice writes/s", "p50 / p99", "etcd writes/s", "p50 / p99", "Sluice / etcd"}, rows...)
	if failover {
		for _, c := range cs {
			if c.FailoverMs > 0 {
				fmt.Fprintf(b, "Failover under %d writers: first write of the new leader %s after the old one stopped.\n\n", c.Writers, ms(c.FailoverMs))
			}
		}
	}
}

func overcommitTable(b *strings.Builder, r overcommitbench.Result) {
	if r.ProbeRequests == 0 {
		return
	}
	fmt.Fprintf(b, "One node of %s millicores and %s; %d online pods and a probe server asking %.0f%% of its CPU and using a tenth of it; "+
		"offline pods burning a CPU each submitted until placement refused (%d placed, %d pending: %s).\n\n",
		Count(float64(r.NodeCPU)), ByteSize(int(r.NodeMemory)), r.OnlinePods, 100*r.OnlineRequestRatio,
		r.OfflinePlaced, r.OfflinePending, orUnknown(r.RefusedReason))
	var rows [][]string
	for _, c := range r.Checks() {
		met := "yes"
		if !c.Met {
			met = "**no**"
		}
		rows = append(rows, []string{c.Name, "**" + c.Value + "**", c.Target, met})
	}
	rows = append(rows,
		[]string{"allocated / capacity (memory)", fmt.Sprintf("%.0f%%", 100*r.MemoryAllocationRatio), "—", "—"},
		[]string{"host CPU utilisation", fmt.Sprintf("%.0f%% (unloaded %.0f%%)", 100*r.Utilization, 100*r.UtilizationUnloaded), "—", "—"},
		[]string{"probe p50 loaded / unloaded", msPair(r.ProbeP50Ms, r.ProbeP50UnloadedMs), "—", "—"},
		[]string{"offline pods killed for memory", strconv.Itoa(r.OfflineKilled), "—", "—"})
	table(b, []string{"measure", "value", "target", "met"}, rows...)
}

func overcommitFleetTable(b *strings.Builder, r overcommitbench.FleetResult) {
	if len(r.Series) == 0 {
		return
	}
	fmt.Fprintf(b, "%s simulated nodes, %d replica(s), heartbeats every %gs; online tasks ask for half the capacity and their usage peaks %gs of every %gs; load average %.1f at the end.\n\n",
		Count(float64(r.Nodes)), r.Replicas, r.HeartbeatSeconds, r.PeakSeconds, r.PeriodSeconds, r.LoadAverage)
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
	secs := func(v float64) string {
		if v < 0 {
			return "did not settle"
		}
		return fmt.Sprintf("%.1f s", v)
	}
	table(b, []string{"measure", "value"},
		[]string{"allocated / capacity (CPU), mean", "**" + pct(r.AllocationRatio) + "**"},
		[]string{"settled off peak / at peak", pct(r.AllocationRatioOffPeak) + " / " + pct(r.AllocationRatioPeak)},
		[]string{"utilization, mean", pct(r.Utilization)},
		[]string{"estimate ÷ configured online usage, off peak / at peak", fmt.Sprintf("%.2f / %.2f", r.EstimateOverConfiguredOffPeak, r.EstimateOverConfiguredPeak)},
		[]string{"offline capacity follows a rise / a fall", secs(r.FollowUpSeconds) + " / " + secs(r.FollowDownSeconds)},
		[]string{"fewest nodes with a fresh heartbeat", fmt.Sprintf("%s of %s", Count(float64(r.MinEstimatedNodes)), Count(float64(r.Nodes)))})
}

// cpuPerTask is a step's CPU time per task placed: the bench process's,
// plus the fleet processes' when the fleet ran apart.
func cpuPerTask(st e2ebench.Step) string {
	if st.FleetCPUPerTaskUs > 0 {
		return fmt.Sprintf("%.0f + %.0f µs", st.BenchCPUPerTaskUs, st.FleetCPUPerTaskUs)
	}
	return fmt.Sprintf("%.0f µs", st.BenchCPUPerTaskUs)
}

func e2eTable(b *strings.Builder, s Suite) {
	r := s.E2E.Result
	if len(r.Steps) == 0 {
		return
	}
	fmt.Fprintf(b, "%d replicas, %s simulated nodes; jobs of %s tasks running %s; steps of %s.\n\n",
		r.Replicas, Count(float64(r.Nodes)), r.ArraySize, strings.TrimPrefix(r.RunTime, "fixed:"), time.Duration(r.StepSeconds*float64(time.Second)))
	var rows [][]string
	for _, st := range r.Steps {
		held := "yes"
		switch {
		case !st.Sustained && len(st.Reasons) == 0:
			held = "interrupted"
		case !st.Sustained:
			held = "no: " + strings.Join(st.Reasons, "; ")
		}
		rows = append(rows, []string{strconv.Itoa(st.Step), Count(st.OfferedTasksPerSec), Count(st.PlacedTasksPerSec),
			msPair(st.P50SubmitToPlacedMs, st.P99SubmitToPlacedMs), msPair(st.P50SubmitToRunningMs, st.P99SubmitToRunningMs),
			strconv.FormatInt(st.Errors, 10), cpuPerTask(st), held})
	}
	table(b, []string{"step", "offered tasks/s", "placed/s", "placed p50 / p99", "running p50 / p99", "errors", "CPU per task", "held"}, rows...)
	if r.SustainedStep == 0 {
		b.WriteString("Highest sustained: none (the first step did not hold).\n\n")
	} else {
		fmt.Fprintf(b, "Highest sustained: **%s tasks/s** (step %d; p99 submit→placed %s, submit→running %s).\n\n",
			Count(r.MaxSustainedTasksPerSec), r.SustainedStep, ms(r.P99SubmitToPlacedMs), ms(r.P99SubmitToRunningMs))
	}
	b.WriteString("Target (issue 8): ≥ 100,000 tasks/s sustained at 10,000 nodes, p99 submit→placed ≤ 1 s and submit→running ≤ 2 s.\n\n")
	if full := FullParams().E2E.Nodes; r.Nodes != full {
		fmt.Fprintf(b, "Run at %s simulated nodes, not the target's %s: its rate is not the target's figure.\n\n",
			Count(float64(r.Nodes)), Count(float64(full)))
	}
	b.WriteString(publishedAnchors)
}

func soakTable(b *strings.Builder, r e2ebench.SoakResult) {
	if len(r.Rows) == 0 {
		return
	}
	dur := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	fmt.Fprintf(b, "%d replicas, %s simulated nodes; jobs of %s tasks running %s; %s tasks/s offered for %s, in rows of %s",
		r.Replicas, Count(float64(r.Nodes)), r.ArraySize, strings.TrimPrefix(r.RunTime, "fixed:"), Count(r.TargetTasksPerSec),
		dur(r.SoakSeconds), dur(r.RowSeconds))
	if r.MoveLeaderEverySeconds > 0 {
		fmt.Fprintf(b, "; the leadership moved every %s", dur(r.MoveLeaderEverySeconds))
	}
	b.WriteString(".\n\n")
	var rows [][]string
	for _, row := range r.Rows {
		held := "yes"
		if !row.Holds {
			held = "no: " + strings.Join(row.Reasons, "; ")
		}
		rss := make([]string, len(row.RSSMiB))
		for i, v := range row.RSSMiB {
			rss[i] = Count(v)
		}
		rows = append(rows, []string{strconv.Itoa(row.Row), Count(row.OfferedTasksPerSec), Count(row.PlacedTasksPerSec),
			msPair(row.P50SubmitToPlacedMs, row.P99SubmitToPlacedMs), msPair(row.P50SubmitToRunningMs, row.P99SubmitToRunningMs),
			strconv.FormatInt(row.Errors, 10), strconv.Itoa(row.LeaderMoves), strings.Join(rss, " / "), held})
	}
	table(b, []string{"row", "offered tasks/s", "placed/s", "placed p50 / p99", "running p50 / p99", "errors", "leader moves",
		"peak RSS MiB (" + strings.Join(r.Processes, " / ") + ")", "held"}, rows...)
	t := r.Total
	fmt.Fprintf(b, "Whole soak: %s of %s tasks/s placed, p99 submit→placed %s, submit→running %s; %s errors, %s tasks unplaced.\n\n",
		Count(t.PlacedTasksPerSec), Count(t.OfferedTasksPerSec), ms(t.P99SubmitToPlacedMs), ms(t.P99SubmitToRunningMs),
		Count(float64(t.Errors)), Count(float64(t.UnplacedTasks)))
	var mem []string
	for _, m := range r.Memory {
		switch {
		case !m.Judged:
			mem = append(mem, m.Process+" not judged")
		case m.Flat:
			mem = append(mem, fmt.Sprintf("%s %+.1f MiB/min (limit %.1f), flat", m.Process, m.SlopeMiBPerMin, m.LimitMiBPerMin))
		default:
			mem = append(mem, fmt.Sprintf("%s %+.1f MiB/min (limit %.1f), **grows**", m.Process, m.SlopeMiBPerMin, m.LimitMiBPerMin))
		}
	}
	if len(mem) > 0 {
		fmt.Fprintf(b, "Memory after row %d (least-squares slope of each row's peak RSS): %s.\n\n", r.Settle, strings.Join(mem, "; "))
	}
	if r.Holds {
		b.WriteString("Soak: **held**.\n\n")
	} else {
		fmt.Fprintf(b, "Soak: **did not hold**: %s.\n\n", strings.Join(r.Reasons, "; "))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(b, "Note: %s.\n\n", n)
	}
	b.WriteString("Target (issue 41): 100,000 tasks/s for ten minutes at 10,000 nodes, the leader moved every 60 s; every minute ≥ 90% placed, " +
		"p99 submit→placed ≤ 1 s and submit→running ≤ 2 s, no failed request, memory flat after the first two minutes.\n\n")
	if full := FullParams().Soak; r.Nodes != full.Nodes || r.TargetTasksPerSec != full.StartRate {
		fmt.Fprintf(b, "Run at %s tasks/s on %s simulated nodes, not the target's %s on %s.\n\n",
			Count(r.TargetTasksPerSec), Count(float64(r.Nodes)), Count(full.StartRate), Count(float64(full.Nodes)))
	}
}

// publishedAnchors are other schedulers' published figures, for scale:
// each measured on its own cluster of many machines, not on this host.
const publishedAnchors = "Published anchors (each on its own cluster of many machines, not this host): " +
	"Nomad C1M 3,750 placements/s; Fuxi 2.0 36–51k tasks/s; kube-scheduler 680–810 pods/s at 5,000 nodes; " +
	"Firmament sub-second placement at 12,500 machines.\n\n"

// table writes a markdown table; cells must not hold "|".
func table(b *strings.Builder, header []string, rows ...[]string) {
	line := func(cells []string) {
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	line(header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range rows {
		esc := make([]string, len(r))
		for i, c := range r {
			esc[i] = strings.ReplaceAll(oneLine(c), "|", `\|`)
		}
		line(esc)
	}
	b.WriteString("\n")
}

// chaosTable renders a chaos run: the verdict, then the worst
// unavailability of each fault kind.
func chaosTable(b *strings.Builder, r chaosbench.Result) {
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**NO**"
	}
	fmt.Fprintf(b, "Seed %d, %s operations (submits, consistent reads, cancels), %s failed requests retried.\n\n", r.Seed, Count(float64(r.Ops)), Count(float64(r.FailedRequests)))
	table(b, []string{"faults", "acked", "lost", "duplicates", "not final", "worst unavailability", "worst wait", "linearizable", "longest double run (bound)", "stale pods", "all kept"},
		[]string{strconv.Itoa(r.Faults), Count(float64(r.Acked)), strconv.Itoa(r.Lost), strconv.Itoa(r.Duplicates), strconv.Itoa(r.NotFinal),
			Count(float64(r.MaxUnavailableMs)) + " ms", Count(float64(r.MaxWaitMs)) + " ms", string(r.Linearizable),
			fmt.Sprintf("%s ms (%s ms)", Count(float64(r.DoubleRun.MaxMs)), Count(float64(r.DoubleRunBoundMs))),
			strconv.Itoa(len(r.StalePods)), yes(r.OK())})
	if n := r.Nodelets; n != nil {
		fmt.Fprintf(b, "Real nodelets (two `sluice nodelet` processes running containers), from their pods' own records: %s pod runs; %d pods started twice on their node after it was killed; "+
			"%d tasks of a node cut off from the network ran again on the other (%d cuts); a task ran on both at once for at most %s ms (bound %s ms); %d stale pods.\n\n",
			Count(float64(n.Pods)), len(n.StartedTwice), n.Moved, n.Cuts, Count(float64(n.DoubleRun.MaxMs)), Count(float64(r.DoubleRunBoundMs)), len(n.StalePods))
	}
	var kinds []string
	worst, wait := map[string]int64{}, map[string]int64{}
	count := map[string]int{}
	for _, f := range r.Sched {
		k := string(f.Kind)
		if count[k] == 0 {
			kinds = append(kinds, k)
		}
		count[k]++
		worst[k] = max(worst[k], f.UnavailableMs)
		wait[k] = max(wait[k], f.WorstWaitMs)
	}
	slices.Sort(kinds)
	var rows [][]string
	for _, k := range kinds {
		rows = append(rows, []string{k, strconv.Itoa(count[k]), Count(float64(worst[k])) + " ms", Count(float64(wait[k])) + " ms"})
	}
	table(b, []string{"fault", "injected", "worst unavailability (fault → next probe placed)", "worst wait (a probe sent during the fault)"}, rows...)
}

func firstMachine(s Suite) (Machine, bool) {
	for _, m := range []*Machine{machineOf(s.Submit), machineOf(s.Latency), machineOf(s.Sched), machineOf(s.Raftkv),
		machineOf(s.E2E), machineOf(s.Soak), machineOf(s.Podstart), machineOf(s.Overcommit), machineOf(s.OvercommitFleet), machineOf(s.Chaos)} {
		if m != nil {
			return *m, true
		}
	}
	return Machine{}, false
}

func machineOf[R any](r *Report[R]) *Machine {
	if r == nil {
		return nil
	}
	return &r.Machine
}

// Count formats f rounded to an integer with thousands separators, as
// the tables and charts label counts.
func Count(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "—"
	}
	s := strconv.FormatInt(int64(math.Round(math.Abs(f))), 10)
	var b strings.Builder
	if f < 0 && s != "0" {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// ms formats milliseconds: one decimal below 100, whole above.
func ms(f float64) string {
	if f < 100 {
		return strconv.FormatFloat(f, 'f', 1, 64) + " ms"
	}
	return Count(f) + " ms"
}

func msPair(a, b float64) string {
	return strings.TrimSuffix(ms(a), " ms") + " / " + ms(b)
}

// kb formats a byte count in decimal kilobytes.
func kb(n int) string { return Count(float64(n)/1000) + " KB" }

func trim(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func roundTo(f float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(f*p) / p
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// EncodingName names a body encoding, "none" for none.
func EncodingName(e string) string {
	if e == "" {
		return "none"
	}
	return e
}

// ByteSize formats a size in bytes, in KiB or MiB when it is a whole
// number of them.
func ByteSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
