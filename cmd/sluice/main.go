// Command sluice is Sluice's single binary: every role (dispatcher, nodelet,
// the local dev cluster, the client commands, the load generator and the
// benchmarks) is a subcommand. This package only wires: it reads flags and
// the environment, builds the config of the package that does the work, and
// maps errors to exit codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/nodelet/runtime/container"
)

// Exit codes.
const (
	exitOK          = 0
	exitError       = 1   // the command failed
	exitUsage       = 2   // bad command line
	exitInterrupted = 130 // stopped by SIGINT or SIGTERM
	// exitInfeasible is the status of `flow solve` on a problem without a
	// feasible flow. It equals exitUsage: DIMACS solvers conventionally
	// exit 2 then.
	exitInfeasible = 2
)

// exitStatusError makes the process exit with code rather than exitError.
type exitStatusError struct {
	code int
	err  error
}

func (e exitStatusError) Error() string { return e.err.Error() }
func (e exitStatusError) Unwrap() error { return e.err }

func main() {
	// The container runtime re-executes this binary as a container's init
	// and as a pod's sandbox; those never return from Reexec.
	container.Reexec()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	code := exitCode(ctx, err)
	if err != nil && code != exitInterrupted {
		fmt.Fprintln(os.Stderr, "sluice:", err)
	}
	os.Exit(code)
}

// run executes the command line args, writing output to stdout and
// diagnostics to stderr. It returns when the command is done or ctx is
// cancelled.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	var prof profiler
	root.PersistentFlags().StringVar(&prof.path, "cpuprofile", "", "write a CPU profile of the command to this file")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return prof.start() }
	err := root.ExecuteContext(ctx)
	if perr := prof.stop(); perr != nil && err == nil {
		err = perr
	}
	return err
}

// profiler writes a CPU profile of a command to path, if set: from the
// command's start to its end, however it ends.
type profiler struct {
	path string
	f    *os.File
}

func (p *profiler) start() error {
	if p.path == "" {
		return nil
	}
	f, err := os.Create(p.path)
	if err != nil {
		return usageError{fmt.Errorf("--cpuprofile: %w", err)}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	p.f = f
	return nil
}

func (p *profiler) stop() error {
	if p.f == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := p.f.Close()
	p.f = nil
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	return nil
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "sluice",
		Short: "Sluice: a distributed batch dispatcher",
		Long: `Sluice places batch jobs on worker hosts in scheduling rounds solved as a
min-cost flow, commits every decision through raft, and runs tasks in real
containers with online/offline overcommit.`,
		SilenceUsage:               true,
		SilenceErrors:              true,
		SuggestionsMinimumDistance: 2,
	}
	root.Args = usageArgs(cobra.NoArgs)
	root.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
	})
	root.AddCommand(newVersionCmd(), newValidateCmd(), newFlowCmd(), newPodCmd(), newBenchCmd(), newDispatcherCmd(), newDevCmd(),
		newSubmitCmd(), newJobsCmd(), newCancelCmd(), newNodesCmd(), newQueuesCmd(), newLogsCmd(), newWatchCmd(), newNodeletCmd(), newLoadgenCmd(), newCapboxesCmd())
	return root
}

// usageError marks a bad command line: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usageArgs wraps a positional-argument check so that its failures are
// usage errors, with suggestions for a mistyped subcommand.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		err := check(c, args)
		if err == nil {
			return nil
		}
		if len(args) > 0 && c.HasSubCommands() {
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				err = fmt.Errorf("%w; did you mean %q?", err, s[0])
			}
		}
		return usageError{fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
	}
}

// exitCode maps the outcome of run to the process exit status.
func exitCode(ctx context.Context, err error) int {
	var ue usageError
	var se exitStatusError
	switch {
	case err == nil:
		return exitOK
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.As(err, &se):
		return se.code
	case errors.As(err, &ue):
		return exitUsage
	default:
		return exitError
	}
}
