package e2ebench

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/raftkv"
)

// usage is what the run's processes have spent so far: the CPU time of
// this process and of the fleet processes, this process's minor page
// faults, the bytes its Go heap has allocated, and the bytes the replicas
// wrote to their stores.
type usage struct {
	benchCPU, fleetCPU time.Duration
	faults             int64
	alloc              uint64
	stored             uint64
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100
// on every Linux ABI Go supports).
const userHZ = 100

// allocMetric is the runtime's count of bytes allocated on the heap,
// liveMetric the heap the last collection found live.
const (
	allocMetric = "/gc/heap/allocs:bytes"
	liveMetric  = "/gc/heap/live:bytes"
)

// liveHeap collects garbage and returns the heap found live, in bytes.
// The collection is a pause of its own: call it between steps.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: liveMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// readUsage reads the usage of this process, of the fleet processes whose
// PIDs are given, and of the replicas' stores. A fleet process that cannot
// be read (it has exited) counts nothing.
func readUsage(fleet []int, replicas []*raftkv.Node) usage {
	var u usage
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.benchCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		u.faults = ru.Minflt
	}
	s := []metrics.Sample{{Name: allocMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		u.alloc = s[0].Value.Uint64()
	}
	for _, r := range replicas {
		u.stored += r.StoreBytes()
	}
	for _, pid := range fleet {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		if ticks, err := procCPUTicks(b); err == nil {
			u.fleetCPU += time.Duration(ticks) * time.Second / userHZ
		}
	}
	return u
}

// procCPUTicks returns the user plus system CPU time of a /proc/<pid>/stat
// line, in USER_HZ ticks.
func procCPUTicks(stat []byte) (int64, error) {
	// The command name, field 2, is in parentheses and may hold spaces;
	// the fields after its closing parenthesis start at field 3 (state),
	// and utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no command name")
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command name, want 13 or more", len(f))
	}
	var total int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: CPU time %q: %w", s, err)
		}
		total += n
	}
	return total, nil
}

// perTask sets st's costs per task placed from the usage at the step's
// start and end.
func (st *Step) perTask(from, to usage) {
	if st.PlacedTasks <= 0 {
		return
	}
	n := float64(st.PlacedTasks)
	st.BenchCPUPerTaskUs = float64(to.benchCPU-from.benchCPU) / float64(time.Microsecond) / n
	st.FleetCPUPerTaskUs = float64(to.fleetCPU-from.fleetCPU) / float64(time.Microsecond) / n
	st.AllocBytesPerTask = float64(to.alloc-from.alloc) / n
	st.PageFaultsPerTask = float64(to.faults-from.faults) / n
	if to.stored >= from.stored { // a replica closed meanwhile counts 0
		st.StoreBytesPerTask = float64(to.stored-from.stored) / n
	}
}
