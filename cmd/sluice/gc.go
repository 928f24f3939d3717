package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// defaultGCPercent is the garbage collector's target heap growth in the
// processes that run a dispatcher, or a fleet of simulated nodes. The
// dispatcher keeps the cluster's state in memory and allocates per job and
// per report; at Go's default of 100 the collector takes about 12% of a
// loaded dispatcher's CPU, at 400 about 4%, and submits are 12–15% faster
// (BENCHMARKS.md, "GC"). A fleet holds thousands of nodelet agents, and at
// 100 its collections hold their reconciles back: at 10,000 nodes and
// 18,000 tasks/s, the p50 submit→running at 400 is half that at 100. The cost is memory:
// the heap may grow to five times what is live, which the soft memory limit
// (memoryLimitShare of the host's memory) bounds.
const defaultGCPercent = 400

// memoryLimitShare is the share of the memory a dispatcher process may use
// (the host's, or its cgroup's limit when lower) that it asks the collector
// to stay under, when GOMEMLIMIT does not say.
const memoryLimitShare = 0.75

// gcSetting is the --gc-percent flag of a command that runs a dispatcher
// or a fleet.
type gcSetting struct{ percent int }

func (g *gcSetting) addFlag(c *cobra.Command) {
	c.Flags().IntVar(&g.percent, "gc-percent", defaultGCPercent,
		"the garbage collector's target heap growth, as GOGC (-1: off); GOGC in the environment wins unless this flag is given")
}

// apply sets the collector: the flag's percentage unless GOGC is set in
// the environment and the flag was not given, and, unless GOMEMLIMIT is
// set, a soft memory limit of memoryLimitShare of the memory the process
// may use (none if that cannot be read).
func (g *gcSetting) apply(c *cobra.Command) error {
	_, err := g.applyShared(c, 1)
	return err
}

// applyShared is apply for one of processes processes of a run that share
// the host: its soft memory limit is memoryLimitShare of the memory split
// evenly between them. It returns that limit, or 0 when it set none
// (GOMEMLIMIT set, or the memory unreadable).
func (g *gcSetting) applyShared(c *cobra.Command, processes int) (int64, error) {
	if g.percent < -1 || g.percent == 0 {
		return 0, usageError{fmt.Errorf("--gc-percent %d: want a positive percentage, or -1 for off", g.percent)}
	}
	if c.Flags().Changed("gc-percent") || os.Getenv("GOGC") == "" {
		debug.SetGCPercent(g.percent)
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	total, err := usableMemory("/")
	if err != nil {
		return 0, nil
	}
	limit := int64(float64(total) * memoryLimitShare / float64(max(processes, 1)))
	debug.SetMemoryLimit(limit)
	return limit, nil
}

// usableMemory returns the memory the process may use, under root (the
// file system's root; tests pass another): the host's MemTotal, or the
// memory limit of the process's cgroup (v2 memory.max, or v1
// memory.limit_in_bytes) when that is lower.
func usableMemory(root string) (int64, error) {
	total, err := hostMemory(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return 0, err
	}
	if limit, ok := cgroupMemoryLimit(root); ok && limit < total {
		return limit, nil
	}
	return total, nil
}

// cgroupMemoryLimit reads the memory limit of the process's cgroup, if it
// has one.
func cgroupMemoryLimit(root string) (int64, bool) {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		// "hierarchy-ID:controllers:path"; cgroup v2's is "0::path".
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			file = filepath.Join(root, "sys/fs/cgroup", parts[2], "memory.max")
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			file = filepath.Join(root, "sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes")
		default:
			continue
		}
		v, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		limit, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
		if err == nil && limit > 0 {
			return limit, true // "max" (no limit) does not parse
		}
	}
	return 0, false
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
