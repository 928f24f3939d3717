package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/bench/suite"
)

func newBenchSuiteCmd() *cobra.Command {
	var (
		quick, noRun, quiet bool
		soakRate            float64
		out, doc            string
		only                []string
	)
	var gc gcSetting
	c := &cobra.Command{
		Use:   "suite",
		Short: "Run every benchmark scenario, write JSON and plots, and update docs/bench/suite.md",
		Long: `Suite runs the benchmark scenarios in order, in process: submit (once per
body encoding), latency, sched, raftkv (with etcd as the anchor when it is
installed), e2e (stepped offered rate), soak (one rate held, row by row;
--soak-rate sets its rate), podstart (only as root with runc on PATH),
overcommit (only as root with the CNI plugins), overcommit-fleet (the same
at fleet scale, on simulated nodes) and chaos (faults across
replica and fleet processes of this binary, as 'sluice bench chaos').
Each scenario's result goes to --out as <scenario>.json, with the time,
the machine and the commit; then the plots are drawn from every JSON file
in --out as PNG files beside them (by the benchplot binary, found beside
this one or on PATH: make benchplot), and with --update-doc the section between the markers ` + suite.BeginMarker + ` and ` + suite.EndMarker + ` of that
file is replaced by tables of the results and links to the plots.

--quick runs small sizes (a few minutes on two cores); without it the sizes
are the issues' (half an hour or more, most of it the e2e steps and the
ten-minute soak at 100k tasks/s). A failing scenario does not stop the
others; the command fails at the end. Progress goes to stderr.`,
		Example: `  sluice bench suite --quick --out docs/bench --update-doc docs/bench/suite.md
  sluice bench suite --only e2e,raftkv --update-doc docs/bench/suite.md
  sluice bench suite --no-run --update-doc docs/bench/suite.md   # plots and tables from the JSON in --out
  sluice bench suite --only soak --soak-rate 80000 --update-doc docs/bench/suite.md`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			mode, params := "full", suite.FullParams()
			if quick {
				mode, params = "quick", suite.QuickParams()
			}
			if c.Flags().Changed("soak-rate") {
				if soakRate <= 0 {
					return usageError{fmt.Errorf("bench suite: --soak-rate %v: want tasks per second above 0", soakRate)}
				}
				params.Soak.StartRate = soakRate
				if err := params.Soak.Validate(); err != nil {
					return usageError{fmt.Errorf("bench suite: --soak-rate %v: %w", soakRate, err)}
				}
			}
			// The fleet processes of e2e, the soak and overcommit-fleet
			// and this one share
			// the host's memory: each gets its part as its soft limit,
			// as in bench e2e.
			fleetProcs := max(params.E2E.FleetProcs, params.Soak.FleetProcs, params.OvercommitFleet.FleetProcs, 0)
			limit, err := gc.applyShared(c, 1+fleetProcs)
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("bench suite: find this binary for the fleet and replica processes: %w", err)
			}
			if fleetProcs > 0 {
				params.E2E.FleetExec, params.Soak.FleetExec, params.OvercommitFleet.FleetExec = exe, exe, exe
				params.E2E.FleetMemoryLimit, params.Soak.FleetMemoryLimit, params.OvercommitFleet.FleetMemoryLimit = limit, limit, limit
			}
			params.Chaos.Exe = exe
			cfg := suite.Config{Mode: mode, Params: params, Out: out, Only: only,
				Logger: slog.New(slog.DiscardHandler)}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			if !quiet {
				cfg.Logger = slog.New(slog.NewTextHandler(c.ErrOrStderr(), nil))
			}
			if doc != "" {
				// Fail before an hour of benchmarks, not after.
				b, err := os.ReadFile(doc)
				if err != nil {
					return err
				}
				if _, err := suite.ReplaceSection(b, ""); err != nil {
					return fmt.Errorf("%w (in %s)", err, doc)
				}
			}
			var runErr error
			if !noRun {
				_, runErr = suite.Run(c.Context(), cfg)
			}
			return renderSuite(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), out, doc, runErr)
		},
	}
	f := c.Flags()
	f.BoolVar(&quick, "quick", false, "small sizes: a few minutes on two cores")
	f.StringVar(&out, "out", "docs/bench", "directory of the JSON results and the plots")
	f.StringVar(&doc, "update-doc", "", "replace the generated section of this markdown file")
	f.StringSliceVar(&only, "only", nil, "run only these scenarios (submit, latency, sched, raftkv, e2e, soak, podstart, overcommit, overcommit-fleet, chaos)")
	f.BoolVar(&noRun, "no-run", false, "run nothing: draw the plots and tables from the JSON already in --out")
	f.BoolVar(&quiet, "quiet", false, "do not log progress to stderr")
	f.Float64Var(&soakRate, "soak-rate", 0, "the soak's offered tasks/s instead of its size's (full 100,000, quick 5,000)")
	gc.addFlag(c)
	return c
}

// renderSuite draws the plots (with the benchplot binary, when it is
// found; else it says so on errw and the tables go without plots) and the
// tables of every result in out, updates doc when set, and prints each
// scenario's outcome. It returns runErr joined with its own error.
func renderSuite(ctx context.Context, w, errw io.Writer, out, doc string, runErr error) error {
	s, err := suite.Load(out)
	if err != nil {
		return errors.Join(runErr, err)
	}
	var charts []suite.Chart
	if plotter, err := suite.FindPlotter(""); err != nil {
		fmt.Fprintf(errw, "plots not drawn: %v\n", err)
	} else if err := suite.DrawCharts(ctx, plotter, out); err != nil {
		return errors.Join(runErr, err)
	} else {
		charts = suite.Charts(s)
	}
	if doc != "" {
		rel, err := relPath(filepath.Dir(doc), out)
		if err != nil {
			return errors.Join(runErr, err)
		}
		if err := suite.UpdateDoc(doc, suite.Markdown(s, charts, rel)); err != nil {
			return errors.Join(runErr, err)
		}
	}
	t := newTable(w, "SCENARIO", "SECONDS", "OUTCOME")
	for _, o := range s.Outcomes() {
		outcome := "ok"
		switch {
		case o.Error != "":
			outcome = "failed: " + o.Error
		case o.Skipped != "":
			outcome = "skipped: " + o.Skipped
		}
		t.row(o.Scenario, fmt.Sprintf("%.1f", o.Seconds), outcome)
	}
	if err := t.flush(); err != nil {
		return errors.Join(runErr, err)
	}
	for _, ch := range charts {
		fmt.Fprintf(w, "plot %s\n", filepath.Join(out, ch.File))
	}
	if doc != "" {
		fmt.Fprintf(w, "updated %s\n", doc)
	}
	return runErr
}

// relPath is target relative to base, both made absolute first.
func relPath(base, target string) (string, error) {
	b, err := filepath.Abs(base)
	if err != nil {
		return "", err
	}
	t, err := filepath.Abs(target)
	if err != nil {
		return "", err
	}
	return filepath.Rel(b, t)
}
