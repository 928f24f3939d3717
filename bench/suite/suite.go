package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
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

// Scenarios are the scenarios' names, in the order Run runs them; each
// one's result is the file <name>.json.
var Scenarios = []string{"submit", "latency", "sched", "raftkv", "e2e", "soak", "podstart", "overcommit", "overcommit-fleet", "chaos"}

// Params are the scenarios' sizes.
type Params struct {
	// Submit is run once per config (one per body encoding).
	Submit  []submitbench.Config
	Latency submitbench.LatencyConfig
	Sched   schedbench.Config
	// Raftkv is run once per config; NoEtcd is set when etcd is not
	// installed.
	Raftkv []storebench.CompareConfig
	// E2E's Logger is Config.Logger when nil.
	E2E e2ebench.Config
	// Soak is an e2e soak (e2ebench.RunSoak); its Logger is
	// Config.Logger when nil.
	Soak e2ebench.Config
	// Podstart is run once per config, as root with runc on PATH only.
	Podstart []podbench.Config
	// Overcommit runs as root with the CNI plugins only; its Logger is
	// Config.Logger when nil.
	Overcommit overcommitbench.Config
	// OvercommitFleet is overcommit at fleet scale, on simulated nodes;
	// its Logger is Config.Logger when nil, and its FleetExec (this
	// binary) is filled by the CLI when it has fleet processes.
	OvercommitFleet overcommitbench.FleetConfig
	// Chaos is the fault schedule against real processes; its Exe (the
	// sluice binary) is filled by the CLI, and without one the scenario
	// is skipped.
	Chaos chaosbench.Config
}

// encodings are the submit benchmark's body encodings, in the plots'
// order.
var encodings = []string{"", "gzip", "zstd"}

func submitConfigs(requests int) []submitbench.Config {
	var out []submitbench.Config
	for _, enc := range encodings {
		out = append(out, submitbench.Config{Replicas: 3, Clients: 8, JobsPerRequest: 1000, Requests: requests,
			Encoding: enc, Timeout: 5 * time.Minute})
	}
	return out
}

// QuickParams are sizes for a run of a few minutes on two cores: every
// scenario, each short and small. Its numbers show trends and catch
// regressions of several times; they are not the issues' figures.
func QuickParams() Params {
	return Params{
		Submit:  submitConfigs(60),
		Latency: submitbench.LatencyConfig{Nodes: 4, Samples: 100},
		Sched:   schedbench.Config{Nodes: 5000, Tasks: 50_000, Replicas: 3, Seed: 1},
		Raftkv: []storebench.CompareConfig{
			{Config: storebench.Config{Writers: 256, ValueBytes: 256, Duration: 3 * time.Second, Warmup: time.Second}, Replicas: 3},
			{Config: storebench.Config{Writers: 4, ValueBytes: 256 << 10, Duration: 3 * time.Second, Warmup: time.Second}, Replicas: 3},
		},
		E2E: e2ebench.Config{Replicas: 3, Nodes: 1000, StartRate: 250, StepFactor: 2, Steps: 7,
			StepDuration: 5 * time.Second, Seed: 1, Timeout: 5 * time.Minute},
		// The shape of the full soak at a rate this fleet holds: a
		// minute in rows of 10 s, the leadership moved every 20 s. Its
		// memory is reported, not judged (every row settles): at this
		// rate the bench process collects every 20 s or so, and its
		// peak RSS, which follows the collector's goal (GOGC 400: five
		// times the live heap), still climbs with the live heap's highs
		// after a minute; only long soaks tell a trend.
		Soak: e2ebench.Config{Replicas: 3, Nodes: 1000, StartRate: 5000, Soak: time.Minute, SoakInterval: 10 * time.Second,
			SoakSettle: 6, MoveLeaderEvery: 20 * time.Second, Seed: 1, Timeout: 5 * time.Minute},
		Podstart:   []podbench.Config{{Pods: 20, Concurrency: 1}, {Pods: 20, Concurrency: 4}},
		Overcommit: overcommitbench.Config{Unloaded: 5 * time.Second, Loaded: 10 * time.Second},
		// Two rises and two falls of the online usage in 40 s, on 200
		// nodes that report every second.
		OvercommitFleet: overcommitbench.FleetConfig{Nodes: 200, HeartbeatPeriod: time.Second, Period: 20 * time.Second,
			PeakLength: 10 * time.Second, OfflineRunTime: 3 * time.Second, Duration: 40 * time.Second, Seed: 1},
		Chaos: chaosbench.Config{Seed: 1, Rounds: 1, Gap: time.Second, Hold: time.Second, Nodes: 20},
	}
}

// FullParams are the sizes the issues ask for (and BENCHMARKS.md's
// sections use); on two cores the whole suite takes ten minutes or more,
// most of it the e2e steps (30 s each, 10,000 nodes).
func FullParams() Params {
	return Params{
		Submit:  submitConfigs(200),
		Latency: submitbench.LatencyConfig{Nodes: 4, Samples: 200},
		Sched:   schedbench.Config{Nodes: 10_000, Tasks: 100_000, Replicas: 3, Seed: 1},
		Raftkv: []storebench.CompareConfig{
			{Config: storebench.Config{Writers: 256, ValueBytes: 256, Duration: 10 * time.Second, Warmup: 2 * time.Second},
				Replicas: 3, Failover: true},
			{Config: storebench.Config{Writers: 1, ValueBytes: 256, Duration: 10 * time.Second, Warmup: 2 * time.Second}, Replicas: 3},
			{Config: storebench.Config{Writers: 4, ValueBytes: 256 << 10, Duration: 10 * time.Second, Warmup: 2 * time.Second}, Replicas: 3},
		},
		E2E: e2ebench.Config{Replicas: 3, Nodes: e2ebench.DefaultNodes, StartRate: e2ebench.DefaultStartRate,
			StepFactor: e2ebench.DefaultStepFactor, Steps: e2ebench.DefaultSteps, StepDuration: e2ebench.DefaultStepDuration, Seed: 1,
			FleetProcs: 3}, // 10,000 nodes' connections need more open files than one process has here
		// Issue 41's soak: 100k tasks/s for ten minutes, the leadership
		// moved every minute, after a minute's warm-up at that rate.
		Soak: e2ebench.Config{Replicas: 3, Nodes: e2ebench.DefaultNodes, StartRate: 100_000, Soak: 10 * time.Minute,
			SoakInterval: time.Minute, MoveLeaderEvery: time.Minute, Warmup: time.Minute, Seed: 1, FleetProcs: 3},
		Podstart:   []podbench.Config{{Pods: 50, Concurrency: 1}, {Pods: 50, Concurrency: 4}},
		Overcommit: overcommitbench.Config{Unloaded: 20 * time.Second, Loaded: 40 * time.Second},
		// Issue 41's fleet scale: 10,000 nodes, two periods of 4 min.
		OvercommitFleet: overcommitbench.FleetConfig{Nodes: 10_000, FleetProcs: 3, OfflineRunTime: 2 * time.Minute,
			Duration: 8 * time.Minute, Seed: 1},
		Chaos: chaosbench.Config{Seed: 1, Rounds: 3, Nodes: 100},
	}
}

// Config says what Run runs and where it writes.
type Config struct {
	// Mode names the Params in the files: "quick" or "full". Default
	// "custom".
	Mode string
	// Params are the scenarios' sizes.
	Params Params
	// Out is the directory of the JSON files, created if needed. Default
	// "docs/bench".
	Out string
	// Only runs these scenarios (names of Scenarios); empty runs all.
	Only []string
	// Logger receives the suite's progress (and e2e's). Default: discard.
	Logger *slog.Logger
	// Now is the clock of the timestamps. Default time.Now.
	Now func() time.Time
}

// ErrUnknownScenario says Config.Only names no scenario.
var ErrUnknownScenario = errors.New("bench suite: unknown scenario")

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	for _, n := range c.Only {
		if !slices.Contains(Scenarios, n) {
			errs = append(errs, fmt.Errorf("%w %q (want one of %s)", ErrUnknownScenario, n, strings.Join(Scenarios, ", ")))
		}
	}
	return errors.Join(errs...)
}

// Machine says where a result was measured.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	GoVersion string `json:"go_version"`
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute averages when the
	// scenario started: this machine is shared, and load explains noise.
	LoadAvg string `json:"load_avg,omitempty"`
	// Commit is the source's git commit, Modified whether the tree had
	// uncommitted changes: from the binary's build info, else from git in
	// the working directory.
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
}

// Report is one scenario's file.
type Report[R any] struct {
	Scenario string    `json:"scenario"`
	Mode     string    `json:"mode"`
	Time     time.Time `json:"timestamp"`
	// Seconds is the scenario's wall time.
	Seconds float64 `json:"seconds"`
	Machine Machine `json:"machine"`
	// Skipped says why the scenario did not run; Notes what else a reader
	// should know (an anchor skipped); Error why it failed (Result then
	// holds what it measured before).
	Skipped string   `json:"skipped,omitempty"`
	Notes   []string `json:"notes,omitempty"`
	Error   string   `json:"error,omitempty"`
	Result  R        `json:"result"`
}

// Suite is the scenarios' reports; a nil one did not run (or has no
// file).
type Suite struct {
	Submit     *Report[[]submitbench.Result]
	Latency    *Report[submitbench.LatencyResult]
	Sched      *Report[schedbench.Result]
	Raftkv     *Report[[]storebench.Comparison]
	E2E        *Report[e2ebench.Result]
	Soak       *Report[e2ebench.SoakResult]
	Podstart   *Report[[]podbench.Result]
	Overcommit *Report[overcommitbench.Result]
	// OvercommitFleet is in the JSON file overcommit-fleet.json.
	OvercommitFleet *Report[overcommitbench.FleetResult]
	Chaos           *Report[chaosbench.Result]
}

// Run runs the scenarios of cfg in order, writing each one's report to
// cfg.Out as soon as it is done. A scenario that fails does not stop the
// next ones; Run returns every failure, joined, with the suite.
func Run(ctx context.Context, cfg Config) (Suite, error) {
	if err := cfg.Validate(); err != nil {
		return Suite{}, err
	}
	if cfg.Mode == "" {
		cfg.Mode = "custom"
	}
	if cfg.Out == "" {
		cfg.Out = "docs/bench"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return Suite{}, fmt.Errorf("bench suite: %w", err)
	}
	r := runner{cfg: cfg, machine: DetectMachine()}
	var s Suite
	p := cfg.Params
	if r.want("submit") {
		s.Submit = run(ctx, &r, "submit", func(ctx context.Context, rep *Report[[]submitbench.Result]) error {
			for _, c := range p.Submit {
				res, err := submitbench.Run(ctx, c)
				if err != nil {
					return fmt.Errorf("encoding %q: %w", c.Encoding, err)
				}
				rep.Result = append(rep.Result, res)
			}
			return nil
		})
	}
	if r.want("latency") {
		s.Latency = run(ctx, &r, "latency", func(ctx context.Context, rep *Report[submitbench.LatencyResult]) (err error) {
			rep.Result, err = submitbench.Latency(ctx, p.Latency)
			return err
		})
	}
	if r.want("sched") {
		s.Sched = run(ctx, &r, "sched", func(ctx context.Context, rep *Report[schedbench.Result]) (err error) {
			rep.Result, err = schedbench.Run(ctx, p.Sched)
			return err
		})
	}
	if r.want("raftkv") {
		s.Raftkv = run(ctx, &r, "raftkv", func(ctx context.Context, rep *Report[[]storebench.Comparison]) error {
			noEtcd := false
			if _, err := exec.LookPath("etcd"); err != nil {
				noEtcd = true
				rep.Notes = append(rep.Notes, "etcd anchor skipped: "+storebench.ErrNoEtcd.Error()+"; or scripts/install-etcd.sh")
			}
			for _, c := range p.Raftkv {
				c.NoEtcd = c.NoEtcd || noEtcd
				res, err := storebench.Compare(ctx, c)
				if err != nil {
					return fmt.Errorf("%d writers of %d bytes: %w", c.Writers, c.ValueBytes, err)
				}
				rep.Result = append(rep.Result, res)
			}
			return nil
		})
	}
	if r.want("e2e") {
		s.E2E = run(ctx, &r, "e2e", func(ctx context.Context, rep *Report[e2ebench.Result]) (err error) {
			c := p.E2E
			if c.Logger == nil {
				c.Logger = cfg.Logger
			}
			rep.Result, err = e2ebench.Run(ctx, c)
			return err
		})
	}
	if r.want("soak") {
		s.Soak = run(ctx, &r, "soak", func(ctx context.Context, rep *Report[e2ebench.SoakResult]) (err error) {
			c := p.Soak
			if c.Logger == nil {
				c.Logger = cfg.Logger
			}
			rep.Result, err = e2ebench.RunSoak(ctx, c)
			return err
		})
	}
	if r.want("podstart") {
		s.Podstart = run(ctx, &r, "podstart", func(ctx context.Context, rep *Report[[]podbench.Result]) error {
			if why := podstartSkip(); why != "" {
				rep.Skipped = why
				return nil
			}
			for _, c := range p.Podstart {
				res, err := podbench.Run(ctx, c)
				if err != nil {
					return fmt.Errorf("concurrency %d: %w", c.Concurrency, err)
				}
				rep.Result = append(rep.Result, res)
			}
			return nil
		})
	}
	if r.want("overcommit") {
		s.Overcommit = run(ctx, &r, "overcommit", func(ctx context.Context, rep *Report[overcommitbench.Result]) (err error) {
			c := p.Overcommit
			if c.Logger == nil {
				c.Logger = cfg.Logger
			}
			rep.Result, err = overcommitbench.Run(ctx, c)
			if why := overcommitSkip(err); why != "" {
				rep.Skipped = why
				return nil
			}
			return err
		})
	}
	if r.want("overcommit-fleet") {
		s.OvercommitFleet = run(ctx, &r, "overcommit-fleet", func(ctx context.Context, rep *Report[overcommitbench.FleetResult]) (err error) {
			c := p.OvercommitFleet
			if c.Logger == nil {
				c.Logger = cfg.Logger
			}
			rep.Result, err = overcommitbench.RunFleet(ctx, c)
			return err
		})
	}
	if r.want("chaos") {
		s.Chaos = run(ctx, &r, "chaos", func(ctx context.Context, rep *Report[chaosbench.Result]) (err error) {
			if p.Chaos.Exe == "" {
				rep.Skipped = "no sluice binary to run the replicas and fleets (Params.Chaos.Exe)"
				return nil
			}
			rep.Result, err = chaosbench.Run(ctx, p.Chaos)
			if err != nil {
				return err
			}
			rep.Notes = append(rep.Notes, rep.Result.Skipped...)
			if !rep.Result.OK() {
				return ErrChaosBroken
			}
			return nil
		})
	}
	return s, errors.Join(r.errs...)
}

// overcommitSkip says why the overcommit benchmark could not run here
// (err, what it returned, is one of its sentinels for a missing part), or
// "".
func overcommitSkip(err error) string {
	for _, e := range []error{overcommitbench.ErrNotRoot, overcommitbench.ErrNoCNI, overcommitbench.ErrNoImage} {
		if errors.Is(err, e) {
			return strings.TrimPrefix(err.Error(), "overcommitbench: ")
		}
	}
	return ""
}

// ErrChaosBroken is the chaos scenario's error when the run broke a
// promise it checks (its Result says which).
var ErrChaosBroken = errors.New("a checked promise was broken: lost, duplicated or unfinished jobs, stale pods, a double run past the bound, or a history that is not linearizable")

// podstartSkip says why the pod start benchmark cannot run here, or "".
func podstartSkip() string {
	if os.Geteuid() != 0 {
		return "not root: containers need namespaces and cgroups"
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return "runc not found on PATH (the anchor); install it with scripts/install-runc.sh"
	}
	return ""
}

// runner carries what every scenario's run shares.
type runner struct {
	cfg     Config
	machine Machine
	errs    []error
}

func (r *runner) want(name string) bool {
	return len(r.cfg.Only) == 0 || slices.Contains(r.cfg.Only, name)
}

// run runs one scenario and writes its report, also when it failed.
func run[R any](ctx context.Context, r *runner, name string, f func(context.Context, *Report[R]) error) *Report[R] {
	m := r.machine
	m.LoadAvg = loadAvg()
	start := r.cfg.Now()
	rep := &Report[R]{Scenario: name, Mode: r.cfg.Mode, Time: start.UTC().Truncate(time.Second), Machine: m}
	r.cfg.Logger.Info("suite: scenario started", "scenario", name)
	began := time.Now()
	err := f(ctx, rep)
	rep.Seconds = roundTo(time.Since(began).Seconds(), 1)
	if err != nil {
		rep.Error = err.Error()
		r.errs = append(r.errs, fmt.Errorf("bench suite: %s: %w", name, err))
	}
	r.cfg.Logger.Info("suite: scenario done", "scenario", name, "seconds", rep.Seconds, "skipped", rep.Skipped, "err", err)
	if werr := writeJSON(filepath.Join(r.cfg.Out, name+".json"), rep); werr != nil {
		r.errs = append(r.errs, fmt.Errorf("bench suite: %s: %w", name, werr))
	}
	return rep
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Load reads the reports in dir; a scenario without a file is left nil.
func Load(dir string) (Suite, error) {
	var s Suite
	errs := []error{
		load(dir, "submit", &s.Submit),
		load(dir, "latency", &s.Latency),
		load(dir, "sched", &s.Sched),
		load(dir, "raftkv", &s.Raftkv),
		load(dir, "e2e", &s.E2E),
		load(dir, "soak", &s.Soak),
		load(dir, "podstart", &s.Podstart),
		load(dir, "overcommit", &s.Overcommit),
		load(dir, "overcommit-fleet", &s.OvercommitFleet),
		load(dir, "chaos", &s.Chaos),
	}
	return s, errors.Join(errs...)
}

func load[R any](dir, name string, dst **Report[R]) error {
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bench suite: load: %w", err)
	}
	var rep Report[R]
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("bench suite: load %s.json: %w", name, err)
	}
	*dst = &rep
	return nil
}

// DetectMachine describes this machine and the running binary's commit.
func DetectMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), CPUModel: cpuModel()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				m.Commit = s.Value
			case "vcs.modified":
				m.Modified = s.Value == "true"
			}
		}
	}
	if m.Commit == "" {
		// A test binary has no VCS stamp; ask git, when there is one.
		if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
			m.Commit = strings.TrimSpace(string(out))
			st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
			m.Modified = err == nil && len(bytes.TrimSpace(st)) > 0
		}
	}
	return m
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range bytes.Lines(b) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && string(bytes.TrimSpace(k)) == "model name" {
			return string(bytes.TrimSpace(v))
		}
	}
	return ""
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Outcome is how one scenario of a suite went.
type Outcome struct {
	Scenario string
	Seconds  float64
	// Skipped and Error are the report's; both empty when it ran.
	Skipped, Error string
}

// Outcomes returns the outcome of every scenario s has a report of, in
// the order of Scenarios.
func (s Suite) Outcomes() []Outcome {
	var out []Outcome
	add := func(name string, seconds float64, skipped, errText string) {
		out = append(out, Outcome{Scenario: name, Seconds: seconds, Skipped: skipped, Error: errText})
	}
	if r := s.Submit; r != nil {
		add(r.Scenario, r.Seconds, r.Skipped, r.Error)
	}
	if r := s.Latency; r != nil {
		add(r.Scenario, r.Seconds, r.Skipped, r.Error)
	}
	if r := s.Sched; r != nil {
		add(r.Scenario, r.Seconds, r.Skipped, r.Error)
	}
	if r := s.Raftkv; r != nil {
		add(r.Scenario, r.Seconds, r.Skipped, r.Error)
	}
	if r := s.E2E; r != nil {
		add(r.Scenario, r.Seconds, r.Skipped, r.Error)
	}
	if r := s.Soak; r != nil {
		add(r.Scenario, r.Seconds, r.Skipped, r.Error)
	}
	if r := s.Podstart; r != nil {
		add(r.Scenario, r.Seconds, r.Skipped, r.Error)
	}
	if r := s.Overcommit; r != nil {
		add(r.Scenario, r.Seconds, r.Skipped, r.Error)
	}
	if r := s.OvercommitFleet; r != nil {
		add(r.Scenario, r.Seconds, r.Skipped, r.Error)
	}
	if r := s.Chaos; r != nil {
		add(r.Scenario, r.Seconds, r.Skipped, r.Error)
	}
	return out
}
