package remote

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/api"
)

// HostCapacity detects what this host offers, for defaults of a node's
// capacity: CPU in millicores is runtime.NumCPU (the CPUs the process may
// run on), lowered to the CPU quota of the process's cgroup when there is
// one; memory is MemTotal of /proc/meminfo, lowered to the cgroup's memory
// limit when there is one.
func HostCapacity() (api.Capacity, error) {
	return hostCapacity("/proc", "/sys/fs/cgroup", goruntime.NumCPU())
}

// hostCapacity is HostCapacity over the given /proc and cgroup mount
// points, for tests.
func hostCapacity(procRoot, cgroupRoot string, cpus int) (api.Capacity, error) {
	c := api.Capacity{CPU: int64(cpus) * 1000}
	b, err := os.ReadFile(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return api.Capacity{}, fmt.Errorf("remote: host capacity: %w", err)
	}
	if c.Memory, err = memTotal(b); err != nil {
		return api.Capacity{}, fmt.Errorf("remote: host capacity: %w", err)
	}
	// The cgroup limits are best effort: a host without them, or with
	// an unexpected layout, is taken as unlimited.
	self, err := os.ReadFile(filepath.Join(procRoot, "self", "cgroup"))
	if err != nil {
		return c, nil
	}
	if q := cgroupCPU(cgroupRoot, self); q > 0 && q < c.CPU {
		c.CPU = q
	}
	if m := cgroupMemory(cgroupRoot, self); m > 0 && m < c.Memory {
		c.Memory = m
	}
	return c, nil
}

// memTotal returns MemTotal of /proc/meminfo in bytes.
func memTotal(b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "MemTotal:" {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || kb <= 0 {
			return 0, fmt.Errorf("/proc/meminfo: bad MemTotal %q", f[1])
		}
		return kb << 10, nil
	}
	return 0, errors.New("/proc/meminfo: no MemTotal")
}

// cgroupPaths maps each controller of /proc/self/cgroup to the process's
// cgroup path; the cgroup v2 path is under "".
func cgroupPaths(self []byte) map[string]string {
	out := map[string]string{}
	for line := range strings.SplitSeq(string(self), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for ctl := range strings.SplitSeq(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out
}

// cgroupCPU returns the CPU quota of the process's cgroup in millicores,
// or 0 when it has none.
func cgroupCPU(root string, self []byte) int64 {
	paths := cgroupPaths(self)
	if p, ok := paths[""]; ok {
		// v2: cpu.max is "max 100000" or "<quota> <period>".
		if b, err := os.ReadFile(filepath.Join(root, p, "cpu.max")); err == nil {
			f := strings.Fields(string(b))
			if len(f) == 2 && f[0] != "max" {
				return millicores(f[0], f[1])
			}
			return 0
		}
	}
	if p, ok := paths["cpu"]; ok {
		for _, dir := range []string{"cpu,cpuacct", "cpu"} {
			q, err1 := os.ReadFile(filepath.Join(root, dir, p, "cpu.cfs_quota_us"))
			per, err2 := os.ReadFile(filepath.Join(root, dir, p, "cpu.cfs_period_us"))
			if err1 == nil && err2 == nil {
				return millicores(strings.TrimSpace(string(q)), strings.TrimSpace(string(per)))
			}
		}
	}
	return 0
}

func millicores(quota, period string) int64 {
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0
	}
	return q * 1000 / p
}

// cgroupMemory returns the memory limit of the process's cgroup in bytes,
// or 0 when it has none.
func cgroupMemory(root string, self []byte) int64 {
	paths := cgroupPaths(self)
	if p, ok := paths[""]; ok {
		if b, err := os.ReadFile(filepath.Join(root, p, "memory.max")); err == nil {
			n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				return 0 // "max"
			}
			return n
		}
	}
	if p, ok := paths["memory"]; ok {
		if b, err := os.ReadFile(filepath.Join(root, "memory", p, "memory.limit_in_bytes")); err == nil {
			n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err != nil || n >= 1<<62 {
				return 0 // unlimited is a huge page-rounded number
			}
			return n
		}
	}
	return 0
}
