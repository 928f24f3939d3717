package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/spf13/cobra"
)

// defaultGCPercent is the garbage collector's target heap growth in the
// processes that run a dispatcher. The dispatcher keeps the cluster's state
// in memory and allocates per job and per report; at Go's default of 100 the
// collector took about 12% of a loaded dispatcher's CPU, at 400 about 4%,
// and submits went 12–15% faster (BENCHMARKS.md, "GC"). The cost is memory:
// the heap may grow to five times what is live, which the soft memory limit
// (memoryLimitShare of the host's memory) bounds.
const defaultGCPercent = 400

// memoryLimitShare is the share of the host's memory a dispatcher process
// asks the collector to stay under, when GOMEMLIMIT does not say.
const memoryLimitShare = 0.75

// gcSetting is the --gc-percent flag of a command that runs a dispatcher.
type gcSetting struct{ percent int }

func (g *gcSetting) addFlag(c *cobra.Command) {
	c.Flags().IntVar(&g.percent, "gc-percent", defaultGCPercent,
		"the garbage collector's target heap growth, as GOGC (-1: off); GOGC in the environment wins unless this flag is given")
}

// apply sets the collector: the flag's percentage unless GOGC is set in
// the environment and the flag was not given, and, unless GOMEMLIMIT is
// set, a soft memory limit of memoryLimitShare of the host's memory (none
// if that cannot be read).
func (g *gcSetting) apply(c *cobra.Command) error {
	if g.percent < -1 || g.percent == 0 {
		return usageError{fmt.Errorf("--gc-percent %d: want a positive percentage, or -1 for off", g.percent)}
	}
	if c.Flags().Changed("gc-percent") || os.Getenv("GOGC") == "" {
		debug.SetGCPercent(g.percent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		if total, err := hostMemory("/proc/meminfo"); err == nil {
			debug.SetMemoryLimit(int64(float64(total) * memoryLimitShare))
		}
	}
	return nil
}

// hostMemory reads MemTotal, in bytes, from a meminfo file.
func hostMemory(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("host memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("MemTotal:"))
		if !ok {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) != 2 || string(fields[1]) != "kB" {
			return 0, fmt.Errorf("host memory: %s: unexpected MemTotal line %q", path, sc.Text())
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil || kb <= 0 {
			return 0, fmt.Errorf("host memory: %s: MemTotal %q is not a positive number of kB", path, fields[0])
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("host memory: read %s: %w", path, err)
	}
	return 0, fmt.Errorf("host memory: %s has no MemTotal line", path)
}
