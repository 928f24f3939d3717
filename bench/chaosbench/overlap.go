package chaosbench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// killedMark is the line the bench appends to a fleet process's pod log
// when it killed the process: the pods it left open ended then.
const killedMark = "killed"

// markKilled appends the killed mark, at t, to the pod log at path.
func markKilled(path string, t time.Time) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaosbench: mark the pod log: %w", err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s %d\n", killedMark, t.UnixNano()); err != nil {
		return fmt.Errorf("chaosbench: mark the pod log: %w", err)
	}
	return nil
}

// podRun is one pod's run on one node.
type podRun struct {
	node       string
	pod        string // the attempt's pod ID
	start, end int64  // Unix ns
}

// readPodLog reads a fleet's pod log (bench/fleet's PodLog lines and the
// bench's killed marks). A pod still open at a killed mark ended then; one
// still open at the end of the file ends at now.
func readPodLog(path string, now time.Time) ([]podRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("chaosbench: pod log: %w", err)
	}
	defer f.Close()
	var out []podRun
	open := map[string]int{} // node+" "+pod → index in out
	closeAll := func(at int64) {
		for k, i := range open {
			out[i].end = at
			delete(open, k)
		}
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		at, err := strconv.ParseInt(fs[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("chaosbench: pod log %s: line %q: %w", path, sc.Text(), err)
		}
		switch {
		case fs[0] == killedMark:
			closeAll(at)
		case fs[0] == "start" && len(fs) >= 4:
			open[fs[2]+" "+fs[3]] = len(out)
			out = append(out, podRun{node: fs[2], pod: fs[3], start: at, end: -1})
		case fs[0] == "end" && len(fs) >= 4:
			if i, ok := open[fs[2]+" "+fs[3]]; ok {
				out[i].end = at
				delete(open, fs[2]+" "+fs[3])
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("chaosbench: pod log %s: %w", path, err)
	}
	closeAll(now.UnixNano())
	return out, nil
}

// DoubleRun is how long tasks ran on two nodes at once.
type DoubleRun struct {
	// Tasks counts the tasks that ran twice at once for any time.
	Tasks int `json:"tasks"`
	// MaxMs is the longest time one task ran twice at once, and
	// MaxTask that task (job.group.index).
	MaxMs   int64  `json:"max_ms"`
	MaxTask string `json:"max_task,omitempty"`
}

// taskOf returns the task of an attempt's pod ID ("j12.0.5.1" → "j12.0.5").
func taskOf(pod string) string {
	if i := strings.LastIndexByte(pod, '.'); i > 0 {
		return pod[:i]
	}
	return pod
}

// doubleRuns finds, per task, the longest time two of its runs (on two
// nodes, or two attempts) overlapped.
func doubleRuns(runs []podRun) DoubleRun {
	byTask := map[string][]podRun{}
	for _, r := range runs {
		byTask[taskOf(r.pod)] = append(byTask[taskOf(r.pod)], r)
	}
	var d DoubleRun
	for task, rs := range byTask {
		longest := int64(0)
		for i := range rs {
			for j := i + 1; j < len(rs); j++ {
				if ov := min(rs[i].end, rs[j].end) - max(rs[i].start, rs[j].start); ov > longest {
					longest = ov
				}
			}
		}
		if longest <= 0 {
			continue
		}
		d.Tasks++
		if ms := time.Duration(longest).Milliseconds(); ms > d.MaxMs || d.MaxTask == "" {
			d.MaxMs, d.MaxTask = max(ms, d.MaxMs), task
		}
	}
	return d
}
