package e2ebench

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestProcCPUTicks(t *testing.T) {
	// Fields 3 to 15 of a stat line: state, then ten numbers, then utime
	// (field 14) and stime (field 15).
	const tail = " S 1 2 3 4 5 6 7 8 9 10 %s %s 99 98"
	line := func(name, utime, stime string) []byte {
		return []byte("4242 (" + name + ")" + strings.ReplaceAll(strings.Replace(tail, "%s", utime, 1), "%s", stime))
	}
	for _, tc := range []struct {
		name  string
		stat  []byte
		ticks int64
		err   string
	}{
		{"plain", line("sluice", "120", "30"), 150, ""},
		{"name with spaces and parentheses", line("a) b (c", "7", "5"), 12, ""},
		{"no name", []byte("4242 sluice S 1 2"), 0, "no command name"},
		{"cut short", []byte("4242 (sluice) S 1 2 3"), 0, "4 fields after the command name"},
		{"not a number", line("sluice", "12x", "3"), 0, `CPU time "12x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := procCPUTicks(tc.stat)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("procCPUTicks = %d, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.ticks {
				t.Fatalf("procCPUTicks = %d, %v; want %d", got, err, tc.ticks)
			}
		})
	}
}

// TestReadUsage checks the meter against this process: a fleet process
// is read from /proc like any other, here this test's own.
func TestReadUsage(t *testing.T) {
	from := readUsage([]int{os.Getpid()}, nil)
	deadline := time.Now().Add(50 * time.Millisecond)
	var sink [][]byte
	for time.Now().Before(deadline) {
		sink = append(sink[:0], make([]byte, 1<<10))
	}
	_ = sink
	to := readUsage([]int{os.Getpid(), -1}, nil)
	if to.benchCPU <= from.benchCPU {
		t.Errorf("this process's CPU time did not grow over 50 ms of work: %v then %v", from.benchCPU, to.benchCPU)
	}
	if to.alloc < from.alloc+1<<10 {
		t.Errorf("allocated bytes %d then %d, want at least 1 KiB more", from.alloc, to.alloc)
	}
	if to.fleetCPU < from.fleetCPU || to.fleetCPU == 0 {
		t.Errorf("fleet CPU (this process, read from /proc) %v then %v", from.fleetCPU, to.fleetCPU)
	}
	st := Step{PlacedTasks: 1000}
	st.perTask(usage{benchCPU: time.Second, alloc: 1000, faults: 10, stored: 1 << 20}, usage{benchCPU: 3 * time.Second, fleetCPU: time.Second, alloc: 5000, faults: 30, stored: 1<<20 + 300_000})
	want := Step{PlacedTasks: 1000, BenchCPUPerTaskUs: 2000, FleetCPUPerTaskUs: 1000, AllocBytesPerTask: 4, PageFaultsPerTask: 0.02, StoreBytesPerTask: 300}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("perTask = %+v, want %+v", st, want)
	}
	// A replica closed during the step reads 0 at its end: no wrap-around.
	st = Step{PlacedTasks: 1000}
	st.perTask(usage{stored: 1 << 20}, usage{stored: 1 << 10})
	if st.StoreBytesPerTask != 0 {
		t.Errorf("store bytes a task %v after the count fell, want 0", st.StoreBytesPerTask)
	}
}
