package suite

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/sluicehq/sluice/bench/helperbin"
	"github.com/sluicehq/sluice/bench/storebench"
)

// Chart is one PNG a suite's results draw.
type Chart struct {
	// File is the PNG's name in the output directory; Title its alt text.
	File, Title string
}

// Chart files.
const (
	ChartE2EThroughput   = "e2e-throughput.png"
	ChartE2ELatency      = "e2e-latency.png"
	ChartRaftkv          = "raftkv.png"
	ChartSubmit          = "submit.png"
	ChartSoak            = "soak.png"
	ChartOvercommit      = "overcommit.png"
	ChartOvercommitFleet = "overcommit-fleet.png"
	ChartChaos           = "chaos.png"
)

// Charts returns the plots s has data for, in a fixed order: e2e
// throughput and latency, the soak's rows, raftkv against etcd (only with
// the anchor), submit by encoding, overcommit's allocation and
// utilisation over time (on a node and across a fleet), chaos unavailability and wait by fault.
func Charts(s Suite) []Chart {
	var out []Chart
	if s.E2E != nil && len(s.E2E.Result.Steps) > 0 {
		out = append(out,
			Chart{ChartE2EThroughput, "e2e: placed tasks/s against offered"},
			Chart{ChartE2ELatency, "e2e: submit→placed and submit→running p50/p99 against offered tasks/s"})
	}
	if s.Soak != nil && len(s.Soak.Result.Rows) > 0 {
		out = append(out, Chart{ChartSoak, "soak: offered and placed tasks/s, p99 submit→placed and →running, and each process's peak RSS, row by row"})
	}
	if s.Raftkv != nil && HasEtcd(s.Raftkv.Result) {
		out = append(out, Chart{ChartRaftkv, "raftkv: writes/s, Sluice against etcd"})
	}
	if s.Submit != nil && len(s.Submit.Result) > 0 {
		out = append(out, Chart{ChartSubmit, "submit: jobs committed/s by body encoding"})
	}
	if s.Overcommit != nil && len(s.Overcommit.Result.Series) > 0 {
		out = append(out, Chart{ChartOvercommit, "overcommit: CPU allocated and host utilisation over time"})
	}
	if s.OvercommitFleet != nil && len(s.OvercommitFleet.Result.Series) > 0 {
		out = append(out, Chart{ChartOvercommitFleet, "overcommit at fleet scale: CPU allocated and used over time as online usage shifts"})
	}
	if s.Chaos != nil && len(s.Chaos.Result.Sched) > 0 {
		out = append(out, Chart{ChartChaos, "chaos: unavailability and worst wait of each fault, in schedule order"})
	}
	return out
}

// HasEtcd reports whether any comparison has the etcd anchor.
func HasEtcd(cs []storebench.Comparison) bool {
	for _, c := range cs {
		if c.Etcd != nil {
			return true
		}
	}
	return false
}

// PlotterName is the name of the chart drawing binary (cmd/benchplot).
const PlotterName = "benchplot"

// ErrNoPlotter: the chart drawing binary is neither beside the running
// executable nor on PATH.
var ErrNoPlotter = errors.New("the " + PlotterName + " binary is neither beside this one nor on PATH (make benchplot builds it into bin/)")

// FindPlotter returns path if it is set, else the chart drawing binary
// beside the running executable (bin/benchplot beside bin/sluice), else the
// one on PATH, or ErrNoPlotter. The charts are drawn by a binary of their
// own so that the sluice binary, which every container's init re-executes,
// does not carry gonum/plot and its fonts.
func FindPlotter(path string) (string, error) {
	if p, ok := helperbin.Find(PlotterName, path); ok {
		return p, nil
	}
	return "", ErrNoPlotter
}

// DrawCharts has the chart drawing binary at plotter (FindPlotter) draw
// the charts of the results in dir (Charts of what Load reads there) into
// dir.
func DrawCharts(ctx context.Context, plotter, dir string) error {
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, plotter, "--dir", dir)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bench suite: %s: %w: %s", plotter, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
