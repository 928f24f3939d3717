// Package charts draws the benchmark suite's results (bench/suite) as PNG
// plots with gonum/plot: e2e placed tasks/s against offered, e2e latencies,
// raftkv against etcd, submit by body encoding, and a soak's rows over
// time (Soak). It is used by its own binary, cmd/benchplot, which `sluice
// bench suite` runs: gonum/plot and its fonts (5 MB, and 2 ms of package
// initialization) stay out of the sluice binary, which every container's
// init re-executes.
//
// Invariants: a chart is a pure function of its results (the same JSON
// gives the same PNG bytes); Draw draws exactly the charts suite.Charts
// lists, under the same file names.
//
// Usage:
//
//	s, err := suite.Load("docs/bench")
//	drawn, err := charts.Draw(s, "docs/bench")
package charts
