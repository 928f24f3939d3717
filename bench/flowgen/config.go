package flowgen

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Defaults for the zero values of Config.
const (
	// DefaultMachines is the number of machines when Config.Machines is 0.
	DefaultMachines = 1000
	// DefaultMachinesPerRack sets Config.Racks when it is 0: the machines
	// divided by it, rounded up, and at least 2.
	DefaultMachinesPerRack = 40
	// DefaultSlots is the number of task slots per machine when
	// Config.Slots is 0.
	DefaultSlots = 12
	// DefaultTasksPerMachine sets Config.Tasks when it is 0: this many
	// tasks per machine.
	DefaultTasksPerMachine = 10
	// DefaultTasksPerJob sets Config.Jobs when it is 0: the tasks divided
	// by it, and at least 1.
	DefaultTasksPerJob = 100
	// DefaultLocalShare is Config.LocalShare when it is 0.
	DefaultLocalShare = 0.5
	// MaxTasks, MaxMachines and MaxSlots bound a Config; they keep every
	// count, supply and capacity far inside flowsolver's limits.
	MaxTasks    = 1 << 24
	MaxMachines = 1 << 22
	MaxSlots    = 1 << 16
)

// ErrBadConfig is wrapped by the error of Config.Validate.
var ErrBadConfig = errors.New("flowgen: bad config")

// JobSizes says how a Config's tasks are split among its jobs.
type JobSizes int

const (
	// SkewedJobs (the default) gives jobs sizes in proportion to
	// Pareto-distributed weights (shape 1.2), and each job at least one
	// task: many small jobs and a few with a large share of the tasks, as
	// in production traces.
	SkewedJobs JobSizes = iota
	// EvenJobs gives every job Tasks/Jobs tasks, and one more to the first
	// Tasks%Jobs jobs.
	EvenJobs
)

var jobSizesNames = []string{SkewedJobs: "skewed", EvenJobs: "even"}

// String returns the name that ParseJobSizes reads.
func (s JobSizes) String() string {
	if s >= 0 && int(s) < len(jobSizesNames) {
		return jobSizesNames[s]
	}
	return fmt.Sprintf("JobSizes(%d)", int(s))
}

// ParseJobSizes reads "skewed" or "even".
func ParseJobSizes(name string) (JobSizes, error) {
	for i, n := range jobSizesNames {
		if n == name {
			return JobSizes(i), nil
		}
	}
	return 0, fmt.Errorf("%w: job sizes %q (want %s)", ErrBadConfig, name, strings.Join(jobSizesNames, " or "))
}

// Config describes a cluster and its pending work. The zero value of every
// field means the documented default, so Config{} is 1,000 machines in 25
// racks with 12 slots each and 10,000 tasks in 100 jobs of skewed sizes,
// half of them data-local, rendered one node per task, from seed 0.
type Config struct {
	// Machines is the number of machines; at most MaxMachines. Default
	// DefaultMachines.
	Machines int
	// Racks is the number of racks; machines are split among them in
	// contiguous runs whose sizes differ by at most one. There must be at
	// least 2 racks and at least 2 machines per rack. Default: Machines /
	// DefaultMachinesPerRack rounded up, and at least 2.
	Racks int
	// Slots is the number of task slots per machine. Each machine gets a
	// uniform random number of free slots in [0, Slots]; the rest are
	// taken by running work. At most MaxSlots; default DefaultSlots.
	Slots int
	// Tasks is the total number of pending tasks. Default
	// DefaultTasksPerMachine × Machines; at most MaxTasks.
	Tasks int
	// Jobs is the number of jobs the tasks belong to; at most Tasks.
	// Default Tasks / DefaultTasksPerJob, and at least 1.
	Jobs int
	// JobSizes says how tasks are split among jobs. Default SkewedJobs.
	JobSizes JobSizes
	// Aggregated renders each task group (identical tasks of one job) as
	// one node with supply = count, feeding an equivalence-class node;
	// otherwise each task is a node with supply 1. Both renderings of one
	// Config and Seed describe the same work and have the same optimal
	// cost. Default false.
	Aggregated bool
	// LocalShare is the fraction of tasks that read a data set and so
	// prefer the machines holding it, in [0, 1]. Zero means
	// DefaultLocalShare; a negative value means no data-local tasks.
	LocalShare float64
	// Seed seeds every random choice: one Config and Seed always give the
	// same graph. Zero is a seed like any other.
	Seed uint64
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Machines == 0 {
		c.Machines = DefaultMachines
	}
	if c.Racks == 0 {
		c.Racks = max(2, (c.Machines+DefaultMachinesPerRack-1)/DefaultMachinesPerRack)
	}
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.Tasks == 0 && c.Machines > 0 && c.Machines <= MaxMachines {
		c.Tasks = DefaultTasksPerMachine * c.Machines
	}
	if c.Jobs == 0 {
		c.Jobs = max(1, c.Tasks/DefaultTasksPerJob)
	}
	if c.LocalShare == 0 {
		c.LocalShare = DefaultLocalShare
	}
	return c
}

// localShare is the fraction of data-local tasks: LocalShare, or 0 when it
// is negative.
func (c Config) localShare() float64 { return max(0, c.LocalShare) }

// Validate reports every problem of c (after defaults), all at once, in an
// error wrapping ErrBadConfig; it returns nil when c is usable.
func (c Config) Validate() error {
	c = c.withDefaults()
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if c.Machines < 0 || c.Machines > MaxMachines {
		bad("machines %d: want 1 to %d", c.Machines, MaxMachines)
	}
	if c.Racks < 2 {
		bad("racks %d: want at least 2", c.Racks)
	}
	if c.Machines > 0 && c.Racks >= 2 && c.Machines < 2*c.Racks {
		bad("machines %d in %d racks: want at least 2 machines per rack", c.Machines, c.Racks)
	}
	if c.Slots < 1 || c.Slots > MaxSlots {
		bad("slots %d: want 1 to %d", c.Slots, MaxSlots)
	}
	if c.Tasks < 1 || c.Tasks > MaxTasks {
		bad("tasks %d: want 1 to %d", c.Tasks, MaxTasks)
	}
	if c.Jobs < 1 || c.Jobs > max(c.Tasks, 1) {
		bad("jobs %d: want 1 to the number of tasks (%d)", c.Jobs, c.Tasks)
	}
	if c.JobSizes < 0 || int(c.JobSizes) >= len(jobSizesNames) {
		bad("job sizes %v unknown", c.JobSizes)
	}
	if math.IsNaN(c.LocalShare) || c.LocalShare > 1 {
		bad("local share %v: want at most 1 (negative for none)", c.LocalShare)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrBadConfig, strings.Join(problems, "; "))
	}
	return nil
}
