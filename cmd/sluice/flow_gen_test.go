package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/bench/flowgen"
	"github.com/sluicehq/sluice/flowsolver"
)

// runGen runs the gen command with args and returns what it printed on
// stdout and stderr.
func runGen(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := newFlowGenCmd()
	c.SetArgs(args)
	c.SetOut(&out)
	c.SetErr(&errOut)
	err = c.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestFlowGen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "per-task.min")
	args := []string{"--machines", "40", "--tasks", "300", "--jobs", "5", "--seed", "7", "-o", file}
	stdout, stderr, err := runGen(t, args...)
	if err != nil {
		t.Fatalf("gen: %v\n%s", err, stderr)
	}
	if stdout != "" || !strings.HasPrefix(stderr, "flow gen: seed 7: ") {
		t.Errorf("gen printed %q on stdout and %q on stderr", stdout, stderr)
	}
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := "c sluice flow gen --machines 40 --racks 2 --slots 12 --tasks 300 --jobs 5 --job-sizes skewed --aggregated=false --local-share 0.5 --seed 7\n"
	if !strings.HasPrefix(string(body), want) {
		t.Errorf("file starts %q, want %q", firstLine(body), want)
	}

	// The file holds the graph flowgen builds for the same config.
	in, err := flowgen.Generate(flowgen.Config{Machines: 40, Tasks: 300, Jobs: 5, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var direct bytes.Buffer
	if err := flowsolver.WriteDIMACS(&direct, in.Graph); err != nil {
		t.Fatal(err)
	}
	if _, problem, _ := strings.Cut(string(body), "\np "); "p "+problem != direct.String() {
		t.Error("the file's problem differs from flowgen's graph for the same config")
	}
	g, err := flowsolver.ReadDIMACS(bytes.NewReader(body))
	if err != nil || g.Nodes() != in.Graph.Nodes() || g.Arcs() != in.Graph.Arcs() {
		t.Errorf("reading the file back: %v", err)
	}

	// The same flags give the same file; the comment line's flags too.
	again := filepath.Join(dir, "again.min")
	regen := strings.Fields(strings.TrimPrefix(firstLine(body), "c sluice flow gen "))
	if _, stderr, err := runGen(t, append(regen, "-o", again)...); err != nil {
		t.Fatalf("gen with the file's own flags: %v\n%s", err, stderr)
	}
	if b, _ := os.ReadFile(again); !bytes.Equal(b, body) {
		t.Error("regenerating from the file's comment line gave another file")
	}

	// Aggregated, to stdout, without data-local tasks.
	stdout, _, err = runGen(t, "--machines", "40", "--tasks", "300", "--aggregated", "--local-share", "0", "--job-sizes", "even")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "--aggregated=true --local-share 0 ") || !strings.Contains(stdout, "(0 data-local)") {
		t.Errorf("aggregated output starts %q", firstLine([]byte(stdout)))
	}
	if _, err := flowsolver.ReadDIMACS(strings.NewReader(stdout)); err != nil {
		t.Errorf("reading the aggregated output: %v", err)
	}
}

func TestFlowGenBadConfig(t *testing.T) {
	for _, args := range [][]string{
		{"--machines", "3"},
		{"--tasks", "5", "--jobs", "6"},
		{"--local-share", "2"},
		{"--job-sizes", "zipf"},
		{"extra"},
	} {
		_, _, err := runGen(t, args...)
		if exitCode(context.Background(), err) != exitUsage {
			t.Errorf("gen %v: %v, want a usage error", args, err)
		}
	}
	missing := filepath.Join(t.TempDir(), "no", "such", "dir", "x.min")
	if _, _, err := runGen(t, "--machines", "10", "-o", missing); err == nil || exitCode(context.Background(), err) != exitError {
		t.Errorf("gen into a missing directory: %v", err)
	}
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}
