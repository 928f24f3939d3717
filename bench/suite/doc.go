// Package suite is `make bench`: it runs Sluice's benchmark scenarios in
// order through their packages (bench/submitbench, bench/schedbench,
// bench/storebench, bench/e2ebench, bench/podbench,
// bench/overcommitbench, bench/chaosbench), writes each one's result as
// DIR/<scenario>.json with the time, the machine and the commit,
// has them drawn as PNG plots (by the benchplot binary: bench/charts, kept
// out of the sluice binary) and renders them as markdown tables for
// docs/bench/suite.md.
//
// The scenarios, in order (Scenarios):
//
//   - submit: jobs committed per second through the HTTP API of three
//     replicas, once per body encoding (none, gzip, zstd);
//   - latency: a single task's submit to running in the dev cluster shape;
//   - sched: committed placements per second of the scheduling loop;
//   - raftkv: the replicated store, with etcd as the anchor when it is
//     installed (noted in the JSON when it is not);
//   - e2e: the stepped end-to-end benchmark, offered rate against placed
//     rate and latencies;
//   - soak: one rate held end to end (e2ebench.RunSoak), its rows over
//     time: placed rate, p99s, each process's memory;
//   - podstart: pod starts against the runc CLI, only as root with runc on
//     PATH (otherwise the JSON says why it was skipped);
//   - overcommit: online pods that ask for much and use little, a probe
//     server, and offline pods until placement refuses, on real
//     containers: CPU allocated over capacity, the probe's p99 against its
//     unloaded anchor, online throttling, over time (only as root with the
//     CNI plugins; otherwise the JSON says why it was skipped);
//   - overcommit-fleet: the same at fleet scale (overcommitbench.RunFleet),
//     simulated nodes reporting their pods' configured usage while the
//     online usage shifts: CPU allocated and used over time, the
//     dispatcher's estimates, how fast offline capacity follows a shift;
//   - chaos: a seeded schedule of faults against three dispatcher
//     processes, fleet processes and, as root, two real container
//     nodelets (bench/chaosbench): lost and duplicated jobs,
//     linearizability, each fault's unavailability, pods run twice.
//
// Two sizes: QuickParams, a few minutes on two cores, and FullParams, the
// sizes the issues ask for (the soak alone is eleven minutes of 100k
// tasks/s).
//
// # Invariants
//
//   - Every scenario run writes its file, also when it failed (Error) or
//     was skipped (Skipped); a failing scenario does not stop the others,
//     and Run reports every failure at the end.
//   - Plots and tables are pure functions of a Suite: the same JSON gives
//     the same PNG bytes and the same markdown.
//   - UpdateDoc changes only the text between BeginMarker and EndMarker.
//
// # Usage
//
//	s, err := suite.Run(ctx, suite.Config{Mode: "quick", Params: suite.QuickParams(), Out: "docs/bench"})
//	all, _ := suite.Load("docs/bench") // with the files of earlier runs
//	plotter, _ := suite.FindPlotter("")
//	err = suite.DrawCharts(ctx, plotter, "docs/bench")
//	charts := suite.Charts(all)
//	err = suite.UpdateDoc("docs/bench/suite.md", suite.Markdown(all, charts, "."))
package suite
