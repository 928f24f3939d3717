package e2ebench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"runtime/metrics"
	"strconv"
	"sync"
	"time"
)

// selfPID is this process's PID: the process whose memory is "bench".
var selfPID = os.Getpid()

// readRSS returns a process's resident set size (VmRSS in
// /proc/<pid>/status), in bytes.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmRSS(b)
}

// parseVmRSS returns the VmRSS line's size of a /proc/<pid>/status file,
// in bytes.
func parseVmRSS(status []byte) (int64, error) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("proc status: VmRSS %q: want a size in kB", bytes.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("proc status: VmRSS %q: want a size in kB", bytes.TrimSpace(rest))
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("proc status: no VmRSS (a kernel thread, or a process exiting)")
}

// rssSampler keeps the peak resident set of some processes between two
// takes, sampling them every so often until stopped.
type rssSampler struct {
	pids []int
	stop func() // ends the sampling goroutine and waits for it

	mu struct {
		sync.Mutex
		peaks []int64 // bytes, since the last take
	}
}

// startRSSSampler samples the processes of pids every every until ctx
// ends or stop is called.
func startRSSSampler(ctx context.Context, pids []int, every time.Duration) *rssSampler {
	s := &rssSampler{pids: pids}
	s.mu.peaks = make([]int64, len(pids))
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	s.stop = func() {
		cancel()
		<-done
	}
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// sample reads every process's RSS once; one that cannot be read counts
// nothing.
func (s *rssSampler) sample() {
	now := make([]int64, len(s.pids))
	for i, pid := range s.pids {
		now[i], _ = readRSS(pid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, v := range now {
		s.mu.peaks[i] = max(s.mu.peaks[i], v)
	}
}

// take samples once more and returns each process's peak since the last
// take, in MiB to a tenth, and starts the next period.
func (s *rssSampler) take() []float64 {
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]float64, len(s.mu.peaks))
	for i, v := range s.mu.peaks {
		out[i] = math.Round(float64(v)/(1<<20)*10) / 10
		s.mu.peaks[i] = 0
	}
	return out
}

// lastLiveHeap returns the heap the last collection found live, in bytes,
// without collecting.
func lastLiveHeap() uint64 {
	s := []metrics.Sample{{Name: liveMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
