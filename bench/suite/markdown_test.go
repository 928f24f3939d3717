package suite_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/bench/suite"
	"github.com/sluicehq/sluice/bench/suite/suitetest"
)

const doc = `# Benchmarks

Intro.

**Machine:** somewhere.

<!-- bench-suite:begin -->
old generated text
| a | b |
<!-- bench-suite:end -->

## api

Hand-written text.
`

func TestUpdateDocReplacesOnlyTheSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := suite.UpdateDoc(path, "\nnew table\n\n| x |\n\n"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(doc, "old generated text\n| a | b |\n", "new table\n\n| x |\n", 1)
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// Again with the same text: nothing changes (the rewrite is stable).
	if err := suite.UpdateDoc(path, "new table\n\n| x |"); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); string(again) != want {
		t.Errorf("a second rewrite changed the file:\n%s", again)
	}
}

func TestUpdateDocNeedsMarkers(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"none":     "# Benchmarks\n",
		"no end":   "<!-- bench-suite:begin -->\n",
		"reversed": "<!-- bench-suite:end -->\n<!-- bench-suite:begin -->\n",
		"twice":    "<!-- bench-suite:begin --><!-- bench-suite:end --><!-- bench-suite:begin --><!-- bench-suite:end -->",
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".md")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		err := suite.UpdateDoc(path, "x")
		if !errors.Is(err, suite.ErrMarkers) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err = %v, want ErrMarkers naming the file", name, err)
		}
		if b, _ := os.ReadFile(path); string(b) != text {
			t.Errorf("%s: the file changed", name)
		}
	}
}

func TestMarkdown(t *testing.T) {
	s := suitetest.Suite()
	md := suite.Markdown(s, suite.Charts(s), "docs/bench")
	for _, want := range []string{
		"_Machine of the last run: 2 × AMD EPYC, Linux 6.18.44, go1.26.8._",
		"| scenario | run | sizes |",
		"| submit | quick | 40,000 jobs an encoding in requests of 1,000, 8 clients |",
		"| sched | quick | 2,000 nodes × 20,000 tasks |",
		"| raftkv | quick | 256 writers × 256 B, 4 writers × 256 KiB |",
		"| e2e | quick | 1,000 simulated nodes, 3 steps of 5s, 500 to 2,000 tasks/s offered |",
		"| soak | quick | 1,000 simulated nodes, 5,000 tasks/s for 4m0s |",
		"| podstart | quick | skipped |",
		"| overcommit-fleet | quick | 200 simulated nodes |",
		"| chaos | quick | 3 faults, 3,456 operations |",
		"The full run's sizes: e2e at 10,000 simulated nodes, the soak 100,000 tasks/s for 10m0s at 10,000 nodes, sched 10,000 nodes × 100,000 tasks.",
		"_quick run: 40,000 jobs an encoding in requests of 1,000, 8 clients; 2026-12-01 10:30 UTC, 12.5 s, load 1.00 0.50 0.25, commit 9b80085aaa (modified)_",
		"_quick run: 1,000 simulated nodes, 3 steps of 5s, 500 to 2,000 tasks/s offered; 2026-12-01 10:30 UTC,",
		"_quick run; 2026-12-01 10:30 UTC, 12.5 s,", // podstart: skipped, no sizes
		"Run at 2,000 nodes × 20,000 tasks, not the full size's 10,000 × 100,000: compare it only with runs of the same size.",
		"Run at 1,000 simulated nodes, not the target's 10,000: its rate is not the target's figure.",
		"Run at 5,000 tasks/s on 1,000 simulated nodes, not the target's 100,000 on 10,000.",
		"3 replicas, 8 clients, 1,000 jobs per request (a 205 KB JSON body;",
		"| none | **65,012** | 97.0 / 266 ms | 40,000 |",
		"| zstd | **67,684** | 96.0 / 280 ms | 40,000 |",
		"3 replicas, 1,000 simulated nodes;",
		"| 50 | 4 | 11.6 ms | **18.3 ms** | 21.0 ms |",
		"| 2,000 | 20,000 (150) | **50,350** | 24.0 / 290 ms | 4% | 5.2 B |",
		"| 256 | 256 B | 12,184 | 16.2 / 109 ms | 1,879 | 118 / 422 ms | **6.5×** |",
		"| 4 | 256 KiB | 93 (24.5 MB/s) | 30.0 / 213 ms | 51 (13.2 MB/s) | 66.0 / 219 ms | **1.8×** |",
		"Failover under 256 writers: first write of the new leader 1,050 ms",
		"| 3 | 2,003 | 1,500 | 470 / 1,854 ms | 1,438 / 2,397 ms | 0 | 412 + 97 µs | no: placed 1500 of 2003 tasks/s offered (75%, want 90%) |",
		"Highest sustained: **995 tasks/s** (step 2; p99 submit→placed 288 ms, submit→running 580 ms).",
		"Target (issue 8): ≥ 100,000 tasks/s sustained at 10,000 nodes",
		"Published anchors (each on its own cluster of many machines, not this host): Nomad C1M 3,750 placements/s;",
		"#### soak: one rate held, row by row",
		"3 replicas, 1,000 simulated nodes; jobs of uniform:1,40 tasks running 1s; 5,000 tasks/s offered for 4m0s, in rows of 1m0s; the leadership moved every 1m0s.",
		"| row | offered tasks/s | placed/s | placed p50 / p99 | running p50 / p99 | errors | leader moves | peak RSS MiB (bench / fleet-1) | held |",
		"| 1 | 5,010 | 4,990 | 60.0 / 180 ms | 120 / 310 ms | 0 | 1 | 611 / 120 | yes |",
		"| 3 | 5,002 | 4,300 | 380 / 1,450 ms | 600 / 2,210 ms | 1 | 1 | 660 / 140 | no: 1 requests failed; p99 submit→placed 1450 ms above 1000 ms; p99 submit→running 2210 ms above 2000 ms |",
		"Whole soak: 4,970 of 4,998 tasks/s placed, p99 submit→placed 900 ms, submit→running 1,300 ms; 1 errors, 0 tasks unplaced.",
		"Memory after row 1 (least-squares slope of each row's peak RSS): bench -1.5 MiB/min (limit 6.6), flat; fleet-1 +9.5 MiB/min (limit 4.0), **grows**.",
		"Soak: **did not hold**: row 3: 1 requests failed;",
		"Target (issue 41): 100,000 tasks/s for ten minutes",
		"Note: the memory grew while the cluster fell behind (1 of the rows judged placed less than 90% of their offer):",
		"![soak: offered and placed tasks/s",
		"Skipped: not root: containers need namespaces and cgroups.",
		"![e2e: placed tasks/s against offered](docs/bench/e2e-throughput.png)",
		"![submit: jobs committed/s by body encoding](docs/bench/submit.png)",
		"#### overcommit: online and offline pods on real containers",
		"One node of 2,000 millicores and 4096 MiB; 2 online pods and a probe server asking 80% of its CPU",
		"(7 placed, 3 pending: no node passes the filters)",
		"| allocated / capacity (CPU) | **168%** | ≥ 130% (Hippo 115%) | yes |",
		"| probe p99 loaded / unloaded | **6.8 / 2.1 ms (3.26×)** | ≤ 1.10× | **no** |",
		"| online throttled | **0.0 ms** | 0 ms | yes |",
		"| host CPU utilisation | 81% (unloaded 38%) | — | — |",
		"![overcommit: CPU allocated and host utilisation over time](docs/bench/overcommit.png)",
		"#### overcommit at fleet scale: simulated nodes reporting usage",
		"| allocated / capacity (CPU), mean | **120.8%** |",
		"| offline capacity follows a rise / a fall | 4.4 s / 5.4 s |",
		"![overcommit at fleet scale: CPU allocated and used over time as online usage shifts](docs/bench/overcommit-fleet.png)",
		"Seed 1, 3,456 operations (submits, consistent reads, cancels), 7 failed requests retried.",
		"| 3 | 1,234 | 0 | 0 | 0 | 1,720 ms | 2,350 ms | yes | 640 ms (4,200 ms) | 0 | yes |",
		"| kill-leader | 2 | 1,720 ms | 2,350 ms |",
		"Real nodelets (two `sluice nodelet` processes running containers), from their pods' own records: 8 pod runs; 0 pods started twice on their node after it was killed; 4 tasks of a node cut off from the network ran again on the other (1 cuts); a task ran on both at once for at most 3,100 ms (bound 4,200 ms); 0 stale pods.",
		"| partition-follower | 1 | 60 ms | 90 ms |",
		"![chaos: unavailability and worst wait of each fault, in schedule order](docs/bench/chaos.png)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if again := suite.Markdown(s, suite.Charts(s), "docs/bench"); again != md {
		t.Error("two renderings of the same suite differ")
	}
}

func TestMarkdownOfFailureAndNote(t *testing.T) {
	s := suite.Suite{Raftkv: suitetest.Suite().Raftkv}
	s.Raftkv.Result = s.Raftkv.Result[:1]
	s.Raftkv.Result[0].Etcd = nil
	s.Raftkv.Notes = []string{"etcd anchor skipped: not installed"}
	s.Raftkv.Error = "4 writers of 262144 bytes: boom\nat line 2"
	md := suite.Markdown(s, nil, "x")
	for _, want := range []string{"Note: etcd anchor skipped: not installed.", "**Failed:** 4 writers of 262144 bytes: boom at line 2",
		"| 256 | 256 B | 12,184 | 16.2 / 109 ms | — | — | — |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "![") {
		t.Errorf("markdown links plots it was not given:\n%s", md)
	}
}

// TestMarkdownAtFullSizes checks that runs at the full sizes carry no
// warning that they are smaller, and say so in their captions.
func TestMarkdownAtFullSizes(t *testing.T) {
	s := suitetest.Suite()
	full := suite.FullParams()
	s.E2E.Mode, s.Sched.Mode, s.Soak.Mode = "full", "full", "full"
	s.E2E.Result.Nodes = full.E2E.Nodes
	s.Sched.Result.Nodes, s.Sched.Result.Tasks = full.Sched.Nodes, full.Sched.Tasks
	s.Soak.Result.Nodes, s.Soak.Result.TargetTasksPerSec = full.Soak.Nodes, full.Soak.StartRate
	md := suite.Markdown(s, nil, "docs/bench")
	for _, want := range []string{
		"| e2e | full | 10,000 simulated nodes, 3 steps of 5s, 500 to 2,000 tasks/s offered |",
		"| sched | full | 10,000 nodes × 100,000 tasks |",
		"| soak | full | 10,000 simulated nodes, 100,000 tasks/s for 4m0s |",
		"_full run: 10,000 simulated nodes, 3 steps of 5s,",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	for _, unwanted := range []string{"not the target's", "not the full size's"} {
		if strings.Contains(md, unwanted) {
			t.Errorf("markdown of full-size runs says %q:\n%s", unwanted, md)
		}
	}
}
