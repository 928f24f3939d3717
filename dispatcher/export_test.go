package dispatcher

import (
	"github.com/sluicehq/sluice/batcher"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/dispatcher/sched"
)

// SetTrace makes the Dispatcher of cfg call f with each action of the
// scheduling core as its shell carries it out.
func SetTrace(cfg *Config, f func(sched.Action)) { cfg.trace = f }

// Settled reports whether d's scheduling shell waits with nothing in
// flight and nothing queued.
func Settled(d *Dispatcher) bool { return d.shell.settled() }

// ReportStats returns the counters of d's report batcher.
func ReportStats(d *Dispatcher) batcher.Stats { return d.reports.Stats() }

// Weigh sets the configured weights in a round's input as a Dispatcher
// configured with weights does.
func Weigh(weights map[string]int64, in *placement.Input) {
	(&Dispatcher{cfg: Config{QueueWeights: weights}}).weigh(in)
}
