package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/flowsolver"
)

// flowSolveOptions are the flags of flow solve.
type flowSolveOptions struct {
	flows   bool          // print the flows, not only the cost
	verify  bool          // run flowsolver.Verify on the solution
	timeout time.Duration // stop the solve after this long; 0: no limit
}

// newFlowSolveCmd returns the "solve" subcommand of "flow".
func newFlowSolveCmd() *cobra.Command {
	var o flowSolveOptions
	c := &cobra.Command{
		Use:   "solve [FILE|-]",
		Short: "Solve a min-cost flow problem in DIMACS format",
		Long: `Solve reads a min-cost flow problem in DIMACS format ("p min", "n" and "a"
lines, lower bounds allowed) from FILE, or from stdin when FILE is absent or
"-", solves it exactly, and prints the solution in DIMACS format: "s COST"
and, with --flows, "f SRC DST FLOW" for every arc that carries flow, with
the file's node numbers. Timings and notes go to stderr as "c" lines;
"c not proven optimal" means that --timeout ran out first and the flow
printed is feasible but perhaps not optimal.

Exit status: 0 when solved; 1 for an unreadable or malformed file (the
message names the line at fault) or a failed --verify; 2 when the problem is
infeasible (the message names a node, by its number in the file, whose
supply or demand cannot be routed) or the command line is bad.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			name := "-"
			if len(args) == 1 {
				name = args[0]
			}
			return runFlowSolve(c.Context(), c.InOrStdin(), c.OutOrStdout(), c.ErrOrStderr(), name, o)
		},
	}
	f := c.Flags()
	f.BoolVar(&o.flows, "flows", false, `also print "f SRC DST FLOW" for every arc that carries flow`)
	f.BoolVar(&o.verify, "verify", false, "check the solution (bounds, conservation, cost, optimality) before printing it")
	f.DurationVar(&o.timeout, "timeout", 0, "stop the solve after this long and print the best flow found (0: no limit)")
	return c
}

// runFlowSolve reads the problem in the file name ("-": stdin), solves it
// and prints the solution on stdout and timings on stderr. When ctx is
// cancelled before the solve proves its flow optimal, it prints nothing on
// stdout and returns ctx's error.
func runFlowSolve(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, name string, o flowSolveOptions) error {
	if o.timeout < 0 {
		return usageError{fmt.Errorf("--timeout %v is negative", o.timeout)}
	}
	start := time.Now()
	g, err := readFlowProblem(stdin, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "c parse time: %s\n", millis(time.Since(start)))

	solveCtx := ctx
	if o.timeout > 0 {
		var cancel context.CancelFunc
		solveCtx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	start = time.Now()
	sol, err := flowsolver.Solve(solveCtx, g)
	fmt.Fprintf(stderr, "c solve time: %s\n", millis(time.Since(start)))
	switch {
	case errors.Is(err, flowsolver.ErrInfeasible):
		return exitStatusError{code: exitInfeasible, err: fmt.Errorf("solve: %w", inFileNumbers(err))}
	case err != nil:
		return fmt.Errorf("solve: %w", err)
	case !sol.Optimal && ctx.Err() != nil:
		return fmt.Errorf("solve: %w", ctx.Err())
	case !sol.Optimal:
		fmt.Fprintln(stderr, "c not proven optimal")
	}

	if o.verify {
		start = time.Now()
		if err := flowsolver.Verify(g, sol); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		fmt.Fprintf(stderr, "c verify time: %s\n", millis(time.Since(start)))
	}
	if _, err := fmt.Fprintf(stdout, "s %d\n", sol.Cost); err != nil {
		return fmt.Errorf("write solution: %w", err)
	}
	if o.flows {
		return flowsolver.WriteFlows(stdout, g, sol)
	}
	return nil
}

// readFlowProblem reads a DIMACS problem from the file name, or from stdin
// for "-".
func readFlowProblem(stdin io.Reader, name string) (*flowsolver.Graph, error) {
	r, closeInput, err := openInput(stdin, name)
	if err != nil {
		return nil, fmt.Errorf("read problem: %w", err)
	}
	defer closeInput()
	g, err := flowsolver.ReadDIMACS(r)
	if err != nil {
		if name == "-" {
			name = "stdin"
		}
		return nil, fmt.Errorf("read problem %s: %w", name, err)
	}
	return g, nil
}

// inFileNumbers returns err, an error from flowsolver.Solve that wraps
// ErrInfeasible, with the node its *flowsolver.InfeasibleError names
// numbered as in the DIMACS file.
func inFileNumbers(err error) error {
	var ie *flowsolver.InfeasibleError
	if !errors.As(err, &ie) {
		return err
	}
	return fileNumbered{err: err, ie: ie}
}

// fileNumbered is an error wrapping a *flowsolver.InfeasibleError whose
// message gives the node by its DIMACS file number, NodeID+1 (the numbering
// of flowsolver.ReadDIMACS), rather than by NodeID. It unwraps to the
// original error, whose InfeasibleError keeps the NodeID.
type fileNumbered struct {
	err error
	ie  *flowsolver.InfeasibleError
}

func (e fileNumbered) Error() string {
	file := *e.ie
	file.Node++
	return strings.Replace(e.err.Error(), e.ie.Error(), file.Error(), 1)
}

func (e fileNumbered) Unwrap() error { return e.err }

// millis formats d in milliseconds with one decimal: "12.3ms".
func millis(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
