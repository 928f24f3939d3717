// Command benchplot draws the charts of the benchmark suite's results: it
// reads every <scenario>.json in --dir (written by `sluice bench suite`)
// and writes the PNG plots beside them, printing each file's path. `sluice
// bench suite` runs it; it is a binary of its own so that the sluice
// binary, which every container's init re-executes, does not carry
// gonum/plot.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/bench/charts"
	"github.com/sluicehq/sluice/bench/suite"
)

// Exit codes.
const (
	exitError = 1
	exitUsage = 2
)

func main() {
	err := run(os.Stdout, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		if errors.Is(err, errUsage) {
			os.Exit(exitUsage)
		}
		os.Exit(exitError)
	}
}

var errUsage = errors.New("usage")

func run(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("benchplot", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", "docs/bench", "directory of the suite's JSON results; the plots are written there")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w (benchplot [--dir DIR])", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q (benchplot [--dir DIR])", errUsage, fs.Args())
	}
	if st, err := os.Stat(*dir); err != nil {
		return err
	} else if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", *dir)
	}
	s, err := suite.Load(*dir)
	if err != nil {
		return err
	}
	drawn, err := charts.Draw(s, *dir)
	if err != nil {
		return err
	}
	for _, c := range drawn {
		fmt.Fprintln(w, filepath.Join(*dir, c.File))
	}
	return nil
}
