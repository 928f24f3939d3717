package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flowsolver"
)

// flowTestdata is where the DIMACS instances live. Each states its answer
// in a comment: "c optimal COST" or "c infeasible".
const flowTestdata = "../../flowsolver/testdata/dimacs"

// execFlowSolve runs the solve command with args and stdin under ctx.
func execFlowSolve(ctx context.Context, stdin string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	c := newFlowSolveCmd()
	c.SetArgs(args)
	c.SetIn(strings.NewReader(stdin))
	c.SetOut(&out)
	c.SetErr(&errOut)
	c.SilenceUsage, c.SilenceErrors = true, true // as under the root command
	err = c.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// checkTimings checks the "c" lines every solve prints on stderr.
func checkTimings(t *testing.T, stderr string) {
	t.Helper()
	for _, re := range []string{`(?m)^c parse time: \d+\.\dms$`, `(?m)^c solve time: \d+\.\dms$`} {
		if !regexp.MustCompile(re).MatchString(stderr) {
			t.Errorf("stderr %q does not match %s", stderr, re)
		}
	}
}

// TestFlowSolveTestdata solves every instance, with --verify, and checks
// the answer its comment states.
func TestFlowSolveTestdata(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(flowTestdata, "*.min"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no instances in %s: %v", flowTestdata, err)
	}
	answer := regexp.MustCompile(`(?m)^c (optimal (-?\d+)|infeasible)$`)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m := answer.FindSubmatch(b)
			if m == nil {
				t.Fatal("no answer comment")
			}
			stdout, stderr, err := execFlowSolve(context.Background(), "", "--verify", f)
			checkTimings(t, stderr)
			if string(m[1]) == "infeasible" {
				var es exitStatusError
				if !errors.As(err, &es) || es.code != exitInfeasible || !errors.Is(err, flowsolver.ErrInfeasible) {
					t.Fatalf("got error %v, want an infeasibility with exit status %d", err, exitInfeasible)
				}
				if stdout != "" {
					t.Errorf("printed %q for an infeasible problem", stdout)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := "s " + string(m[2]) + "\n"; stdout != want {
				t.Errorf("printed %q, want %q", stdout, want)
			}
			if !strings.Contains(stderr, "c verify time: ") || strings.Contains(stderr, "not proven optimal") {
				t.Errorf("stderr %q", stderr)
			}
		})
	}
}

func TestFlowSolveFlows(t *testing.T) {
	stdout, _, err := execFlowSolve(context.Background(), "", "--flows", filepath.Join(flowTestdata, "networkx.min"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "s 24\nf 1 2 4\nf 1 3 1\nf 2 4 4\nf 3 4 1\n"; stdout != want {
		t.Errorf("printed\n%s\nwant\n%s", stdout, want)
	}
}

func TestFlowSolveStdin(t *testing.T) {
	in := "p min 3 2\nn 1 2\nn 3 -2\na 1 2 0 2 5\na 2 3 1 2 -1\n"
	for _, args := range [][]string{{}, {"-"}, {"--flows", "-"}} {
		stdout, stderr, err := execFlowSolve(context.Background(), in, args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		want := "s 8\n"
		if len(args) == 2 {
			want += "f 1 2 2\nf 2 3 2\n"
		}
		if stdout != want {
			t.Errorf("%q printed %q, want %q", args, stdout, want)
		}
		checkTimings(t, stderr)
	}
}

// TestFlowSolveInfeasible checks the exit status and that the message names
// the node by its number in the file.
func TestFlowSolveInfeasible(t *testing.T) {
	_, _, err := execFlowSolve(context.Background(), "", filepath.Join(flowTestdata, "infeasible.min"))
	var es exitStatusError
	var ie *flowsolver.InfeasibleError
	if !errors.As(err, &es) || es.code != exitInfeasible || !errors.As(err, &ie) {
		t.Fatalf("got %v, want an InfeasibleError with exit status %d", err, exitInfeasible)
	}
	// File nodes 2 (supply 5) and 4 (demand 5) are NodeIDs 1 and 3.
	if ie.Node != 1 && ie.Node != 3 {
		t.Fatalf("InfeasibleError names NodeID %d, want 1 or 3", ie.Node)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "solve: infeasible: 5 units of ") || !strings.Contains(msg, fmt.Sprintf(" at node %d ", ie.Node+1)) {
		t.Errorf("message %q does not name file node %d", msg, ie.Node+1)
	}

	// Unbalanced supplies: the solver's note on the imbalance is kept.
	_, _, err = execFlowSolve(context.Background(), "p min 2 1\nn 1 3\na 1 2 0 9 1\n")
	if !errors.As(err, &es) || es.code != exitInfeasible {
		t.Fatalf("unbalanced: got %v, want exit status %d", err, exitInfeasible)
	}
	if want := "solve: infeasible: 3 units of supply at node 1 "; !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "differ by 3") {
		t.Errorf("unbalanced: message %q, want it to start with %q and give the imbalance", err, want)
	}
}

func TestFlowSolveParseError(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.min")
	if err := os.WriteFile(bad, []byte("p min 2 1\nc\na 1 5 0 1 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := execFlowSolve(context.Background(), "", bad)
	want := "read problem " + bad + ": flowsolver: bad DIMACS input: line 3: arc head 5 out of range 1..2"
	if err == nil || err.Error() != want || !errors.Is(err, flowsolver.ErrDIMACS) {
		t.Fatalf("got %v, want %s", err, want)
	}
	if code := exitCode(context.Background(), err); code != exitError || stdout != "" {
		t.Errorf("exit status %d, stdout %q; want %d and nothing", code, stdout, exitError)
	}

	_, _, err = execFlowSolve(context.Background(), "p min 1 0\np min 1 0\n")
	if want := "read problem stdin: flowsolver: bad DIMACS input: line 2: second problem line (the first is line 1)"; err == nil || err.Error() != want {
		t.Errorf("from stdin: got %v, want %s", err, want)
	}

	_, _, err = execFlowSolve(context.Background(), "", filepath.Join(t.TempDir(), "missing.min"))
	if !errors.Is(err, os.ErrNotExist) || exitCode(context.Background(), err) != exitError {
		t.Errorf("missing file: %v", err)
	}
}

func TestFlowSolveUsage(t *testing.T) {
	for _, args := range [][]string{{"a.min", "b.min"}, {"--timeout", "-1s", "-"}} {
		_, _, err := execFlowSolve(context.Background(), "p min 0 0\n", args...)
		if code := exitCode(context.Background(), err); code != exitUsage {
			t.Errorf("%q: exit status %d (%v), want %d", args, code, err, exitUsage)
		}
	}
}

// TestFlowSolveTimeout: a deadline that has passed before the solve starts
// still gives a feasible flow, which --verify accepts; it is optimal, or
// stderr says it may not be.
func TestFlowSolveTimeout(t *testing.T) {
	stdout, stderr, err := execFlowSolve(context.Background(), "", "--timeout", "1ns", "--verify", filepath.Join(flowTestdata, "transport.min"))
	if err != nil {
		t.Fatal(err)
	}
	if stdout != "s 465\n" && !strings.Contains(stderr, "c not proven optimal\n") {
		t.Errorf("printed %q, not the optimum, and stderr %q does not say so", stdout, stderr)
	}
	if !strings.HasPrefix(stdout, "s ") {
		t.Errorf("printed %q, want a solution", stdout)
	}
}

// TestFlowSolveInterrupted: when the command's context is cancelled, the
// command prints no unproven solution and exits as interrupted.
func TestFlowSolveInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stdout, stderr, err := execFlowSolve(ctx, "", filepath.Join(flowTestdata, "transport.min"))
	switch {
	case err == nil:
		if stdout != "s 465\n" || strings.Contains(stderr, "not proven optimal") {
			t.Errorf("no error, but printed %q and %q", stdout, stderr)
		}
	case !errors.Is(err, context.Canceled) || exitCode(ctx, err) != exitInterrupted || stdout != "":
		t.Errorf("got %v (exit status %d) and printed %q; want an interruption and nothing", err, exitCode(ctx, err), stdout)
	}
}

func TestExitStatusError(t *testing.T) {
	inner := errors.New("boom")
	err := fmt.Errorf("outer: %w", exitStatusError{code: 7, err: inner})
	var es exitStatusError
	if !errors.As(err, &es) || es.code != 7 || !errors.Is(err, inner) || err.Error() != "outer: boom" {
		t.Errorf("exitStatusError does not wrap: %v", err)
	}
}
