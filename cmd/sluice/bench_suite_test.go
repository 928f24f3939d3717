package main

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/bench/suite"
)

// submitReport is a submit scenario's file as the suite writes it.
const submitReport = `{"scenario": "submit", "mode": "quick", "timestamp": "2026-12-01T10:30:00Z", "seconds": 4.5,
  "machine": {"cpus": 2, "cpu_model": "AMD EPYC", "kernel": "6.18.44", "go_version": "go1.26.8"},
  "result": [{"replicas": 3, "clients": 8, "jobs_per_request": 1000, "encoding": "", "jobs": 40000, "jobs_per_sec": 65012.4,
    "p50_ms": 97, "p99_ms": 266, "body_bytes": 204800, "seconds": 0.6}]}`

// plotterOnPath builds cmd/benchplot into a directory it puts first on
// PATH, for the suite to find, or hides every benchplot when build is
// false.
func plotterOnPath(t *testing.T, build bool) {
	t.Helper()
	bin := t.TempDir()
	if build {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, suite.PlotterName), "github.com/sluicehq/sluice/cmd/benchplot")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build benchplot: %v\n%s", err, out)
		}
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		return
	}
	t.Setenv("PATH", bin)
}

// TestBenchSuiteNoRun renders the plots and the doc section from JSON
// already in --out, running nothing.
func TestBenchSuiteNoRun(t *testing.T) {
	plotterOnPath(t, true)
	dir := t.TempDir()
	out := filepath.Join(dir, "docs", "bench")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "submit.json"), []byte(submitReport), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(dir, "BENCHMARKS.md")
	text := "# Benchmarks\n\n" + suite.BeginMarker + "\nold\n" + suite.EndMarker + "\n\n## rest\n"
	if err := os.WriteFile(doc, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"bench", "suite", "--no-run", "--out", out, "--update-doc", doc}, &stdout, &stderr); err != nil {
		t.Fatalf("bench suite: %v\nstderr: %s", err, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "submit.png"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Errorf("submit.png: %v", err)
	}
	got, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| none | **65,012** | 97.0 / 266 ms |", "![submit: jobs committed/s by body encoding](docs/bench/submit.png)",
		"\n\n## rest\n"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("doc lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "old") {
		t.Errorf("doc kept the old section:\n%s", got)
	}
	for _, want := range []string{"submit", "ok", "submit.png", "updated " + doc} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
}

// TestBenchSuiteWithoutPlotter: without the benchplot binary the tables
// are rendered, without plots, and stderr says why.
func TestBenchSuiteWithoutPlotter(t *testing.T) {
	plotterOnPath(t, false)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "submit.json"), []byte(submitReport), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(dir, "BENCHMARKS.md")
	if err := os.WriteFile(doc, []byte(suite.BeginMarker+"\n"+suite.EndMarker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"bench", "suite", "--no-run", "--out", dir, "--update-doc", doc}, &stdout, &stderr); err != nil {
		t.Fatalf("bench suite: %v\nstderr: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "plots not drawn") {
		t.Errorf("stderr does not say the plots were not drawn: %s", stderr.String())
	}
	got, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "**65,012**") || strings.Contains(string(got), ".png") {
		t.Errorf("doc without plots:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "submit.png")); err == nil {
		t.Error("submit.png drawn without the plotter")
	}
}

// TestBenchSuiteNeedsMarkers fails before running anything when the doc
// has no markers.
func TestBenchSuiteNeedsMarkers(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "BENCHMARKS.md")
	if err := os.WriteFile(doc, []byte("# Benchmarks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"bench", "suite", "--quick", "--out", out, "--update-doc", doc}, &stdout, &stderr)
	if !errors.Is(err, suite.ErrMarkers) {
		t.Fatalf("err = %v, want ErrMarkers", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("out dir exists (%v): the suite ran", err)
	}
}

func TestBenchSuiteRejectsUnknownScenario(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"bench", "suite", "--only", "sched,nope", "--out", t.TempDir()}, &stdout, &stderr)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("err = %v, want a usage error naming nope", err)
	}
}

func TestBenchSuiteSoakRate(t *testing.T) {
	for _, rate := range []string{"-5", "0", "0.5"} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"bench", "suite", "--quick", "--only", "soak", "--soak-rate", rate, "--out", t.TempDir()}, &stdout, &stderr)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--soak-rate "+rate) {
			t.Errorf("--soak-rate %s: err = %v, want a usage error naming it", rate, err)
		}
	}
}
