package loadgen

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/api"
)

// Arrival processes, the values of Arrival.Process.
const (
	// ArrivalConstant submits a job every 1/Rate seconds.
	ArrivalConstant = "constant"
	// ArrivalPoisson submits jobs with exponential gaps of mean 1/Rate.
	ArrivalPoisson = "poisson"
	// ArrivalBursts submits Burst jobs at once every Period.
	ArrivalBursts = "bursts"
)

// Arrival says when jobs arrive.
type Arrival struct {
	// Process is ArrivalConstant, ArrivalPoisson or ArrivalBursts.
	// Default constant.
	Process string `json:"process,omitempty"`
	// Rate is jobs per second, for constant and poisson.
	Rate float64 `json:"rate,omitempty"`
	// Burst is the jobs of each burst and Period the time between bursts
	// (the first is at time 0), for bursts.
	Burst  int64        `json:"burst,omitempty"`
	Period api.Duration `json:"period,omitzero"`
}

// Workload describes a seeded stream of jobs: when they arrive and what
// they look like. Build one in code or from flags, or read it from a
// workload file with ReadWorkload; zero fields take the defaults listed.
// Call Validate (NewGenerator does) before use.
type Workload struct {
	// Seed makes the stream reproducible: the same Workload and Seed give
	// the same jobs at the same offsets.
	Seed uint64 `json:"seed,omitempty"`
	// Arrival is when jobs arrive.
	Arrival Arrival `json:"arrival"`
	// Duration ends the stream: jobs arrive at offsets below it. Jobs
	// ends it after that many jobs. At least one is set; with both, the
	// first reached ends it.
	Duration api.Duration `json:"duration,omitzero"`
	Jobs     int64        `json:"jobs,omitempty"`
	// Name is every job's name. Default "loadgen".
	Name string `json:"name,omitempty"`
	// ArraySize is each job's task count (one task group). Default
	// fixed:1.
	ArraySize IntDist `json:"array_size,omitzero"`
	// Shapes are the resource shapes of the tasks' one container, drawn
	// per job by weight. Default one shape, 100m/64Mi.
	Shapes []Shape `json:"shapes,omitempty"`
	// RunTime is how long each simulated task runs (api.SimSpec.RunTime),
	// drawn per job. Default fixed:1s.
	RunTime DurationDist `json:"run_time,omitzero"`
	// OnlineFraction is the share of jobs of QoS online, 0 to 1; the
	// others are offline. Default 0.
	OnlineFraction float64 `json:"online_fraction,omitempty"`
	// Queues are drawn per job by weight. Default the default queue.
	Queues []Queue `json:"queues,omitempty"`
	// Priorities are drawn per job by weight. Default priority 0.
	Priorities []Priority `json:"priorities,omitempty"`
	// Pool is every job's pool. Default any pool.
	Pool string `json:"pool,omitempty"`
	// Rootfs and Command fill the container, which simulated nodes do not
	// run. Defaults "/loadgen" and ["/loadgen"].
	Rootfs  string   `json:"rootfs,omitempty"`
	Command []string `json:"command,omitempty"`
}

// Defaults of Workload.
const (
	DefaultName    = "loadgen"
	DefaultRootfs  = "/loadgen"
	DefaultRunTime = time.Second
)

// DefaultShape is the shape of a Workload that lists none.
var DefaultShape = Shape{CPU: 100, Memory: 64 << 20, Weight: 1}

// WithDefaults returns w with its zero fields set to their defaults.
func (w Workload) WithDefaults() Workload {
	if w.Arrival.Process == "" {
		w.Arrival.Process = ArrivalConstant
	}
	if w.Name == "" {
		w.Name = DefaultName
	}
	if w.ArraySize.Kind == "" {
		w.ArraySize = Fixed(1)
	}
	if len(w.Shapes) == 0 {
		w.Shapes = []Shape{DefaultShape}
	}
	if w.RunTime.Kind == "" {
		w.RunTime = FixedDuration(DefaultRunTime)
	}
	if w.Rootfs == "" {
		w.Rootfs = DefaultRootfs
	}
	if len(w.Command) == 0 {
		w.Command = []string{DefaultRootfs}
	}
	return w
}

// ValidationError lists every problem of a Workload, each as
// "path: message" with the path of its JSON field.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	return "loadgen: invalid workload: " + strings.Join(e.Problems, "; ")
}

// Validate reports every problem of w (with its defaults applied) at once,
// as a *ValidationError.
func (w Workload) Validate() error {
	w = w.WithDefaults()
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	a := w.Arrival
	switch a.Process {
	case ArrivalConstant, ArrivalPoisson:
		if !(a.Rate > 0) || !finite(a.Rate) || a.Rate > 1e7 {
			add("arrival.rate: %v: want jobs per second above 0, at most 1e7", a.Rate)
		}
		if a.Burst != 0 || a.Period != 0 {
			add("arrival: burst and period are for the bursts process, not %s", a.Process)
		}
	case ArrivalBursts:
		if a.Burst < 1 {
			add("arrival.burst: %d: want at least 1 job per burst", a.Burst)
		}
		if a.Period <= 0 {
			add("arrival.period: %v: want a positive duration", a.Period)
		} else if a.Burst >= 1 && float64(a.Burst)/a.Period.Std().Seconds() > 1e7 {
			add("arrival: %d jobs every %v is more than 1e7 jobs per second", a.Burst, a.Period)
		}
		if a.Rate != 0 {
			add("arrival.rate: not used by the bursts process (it sends burst jobs every period)")
		}
	default:
		add("arrival.process: %q: want %s, %s or %s", a.Process, ArrivalConstant, ArrivalPoisson, ArrivalBursts)
	}
	switch {
	case w.Duration < 0:
		add("duration: %v: want a positive duration", w.Duration)
	case w.Jobs < 0:
		add("jobs: %d: want a positive count", w.Jobs)
	case w.Duration == 0 && w.Jobs == 0:
		add("duration, jobs: set at least one, to end the stream")
	}
	if w.Name != "" && len(w.Name) > api.MaxNameLen {
		add("name: longer than %d bytes", api.MaxNameLen)
	}
	p = append(p, w.ArraySize.problems("array_size", api.MaxTaskCount)...)
	for i, s := range w.Shapes {
		path := fmt.Sprintf("shapes[%d]", i)
		if s.CPU <= 0 || s.CPU > api.MaxCPU {
			add("%s.cpu: %dm: want above 0, at most %dm", path, s.CPU, api.MaxCPU)
		}
		if s.Memory <= 0 || s.Memory > api.MaxMemory {
			add("%s.memory: %d: want above 0, at most %d bytes", path, s.Memory, int64(api.MaxMemory))
		}
		p = append(p, weightProblems(path, s.Weight)...)
	}
	p = append(p, w.RunTime.problems("run_time")...)
	if !(w.OnlineFraction >= 0 && w.OnlineFraction <= 1) {
		add("online_fraction: %v: want 0 to 1", w.OnlineFraction)
	}
	for i, q := range w.Queues {
		path := fmt.Sprintf("queues[%d]", i)
		if q.Name == "" || len(q.Name) > api.MaxNameLen {
			add("%s.name: %q: want a name of 1 to %d bytes", path, q.Name, api.MaxNameLen)
		}
		p = append(p, weightProblems(path, q.Weight)...)
	}
	for i, pr := range w.Priorities {
		path := fmt.Sprintf("priorities[%d]", i)
		if pr.Priority < 0 || pr.Priority > api.MaxPriority {
			add("%s.priority: %d: want 0 to %d", path, pr.Priority, api.MaxPriority)
		}
		p = append(p, weightProblems(path, pr.Weight)...)
	}
	if !strings.HasPrefix(w.Rootfs, "/") {
		add("rootfs: %q: want an absolute path", w.Rootfs)
	}
	if w.Command[0] == "" {
		add("command[0]: must not be empty")
	}
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	// What the api would refuse in the jobs themselves (a pool name, say)
	// is checked on a sample job.
	g := newGenerator(w)
	if it, ok := g.Next(); ok {
		it.Job.SetDefaults()
		if err := api.ValidateJobs([]api.JobSpec{it.Job}); err != nil {
			return &ValidationError{Problems: []string{"generated job: " + err.Error()}}
		}
	}
	return nil
}

// OfferedJobRate returns the mean jobs per second w offers.
func (w Workload) OfferedJobRate() float64 {
	if w.Arrival.Process == ArrivalBursts {
		if w.Arrival.Period <= 0 {
			return 0
		}
		return float64(w.Arrival.Burst) / w.Arrival.Period.Std().Seconds()
	}
	return w.Arrival.Rate
}

// ErrWorkloadFile is wrapped by every error of ReadWorkload and
// DecodeWorkload about the file's content.
var ErrWorkloadFile = errors.New("loadgen: bad workload file")

// ReadWorkload reads a workload file (see DecodeWorkload).
func ReadWorkload(path string) (Workload, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Workload{}, fmt.Errorf("loadgen: read workload: %w", err)
	}
	w, err := DecodeWorkload(b)
	if err != nil {
		return Workload{}, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// DecodeWorkload reads a Workload from JSON, strictly: an unknown or
// duplicate field, a value of the wrong type or trailing data is an
// error that names its path ("arrival.rat: unknown field"); every such
// problem is reported. It does not validate the values (Validate does).
//
//	{"seed": 7, "arrival": {"process": "poisson", "rate": 200},
//	 "duration": "30s", "array_size": "zipf:1.5,1000",
//	 "shapes": [{"cpu": "500m", "memory": "512Mi", "weight": 3},
//	            {"cpu": "2", "memory": "4Gi"}],
//	 "run_time": "uniform:100ms,2s", "online_fraction": 0.2,
//	 "queues": [{"name": "batch", "weight": 4}, {"name": "adhoc"}],
//	 "priorities": [{"priority": 0, "weight": 9}, {"priority": 100}]}
func DecodeWorkload(b []byte) (Workload, error) {
	var w Workload
	if errs := decodeStrict(b, &w); len(errs) > 0 {
		return Workload{}, fmt.Errorf("%w: %w", ErrWorkloadFile, errors.Join(errs...))
	}
	return w, nil
}
