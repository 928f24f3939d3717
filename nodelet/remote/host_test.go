package remote

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

const meminfo = "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\n"

func TestHostCapacityCgroupV2(t *testing.T) {
	dir := t.TempDir()
	proc, cg := filepath.Join(dir, "proc"), filepath.Join(dir, "cg")
	write(t, filepath.Join(proc, "meminfo"), meminfo)
	write(t, filepath.Join(proc, "self", "cgroup"), "0::/box\n")
	write(t, filepath.Join(cg, "box", "cpu.max"), "150000 100000\n")
	write(t, filepath.Join(cg, "box", "memory.max"), "1073741824\n")
	c, err := hostCapacity(proc, cg, 8)
	if err != nil {
		t.Fatal(err)
	}
	if c.CPU != 1500 || c.Memory != 1<<30 {
		t.Errorf("capacity %+v, want 1500m and 1Gi", c)
	}

	// Unlimited: the host's.
	write(t, filepath.Join(cg, "box", "cpu.max"), "max 100000\n")
	write(t, filepath.Join(cg, "box", "memory.max"), "max\n")
	if c, err = hostCapacity(proc, cg, 8); err != nil || c.CPU != 8000 || c.Memory != 16000000<<10 {
		t.Errorf("capacity %+v, %v, want 8000m and MemTotal", c, err)
	}
}

func TestHostCapacityCgroupV1(t *testing.T) {
	dir := t.TempDir()
	proc, cg := filepath.Join(dir, "proc"), filepath.Join(dir, "cg")
	write(t, filepath.Join(proc, "meminfo"), meminfo)
	write(t, filepath.Join(proc, "self", "cgroup"), "5:cpu,cpuacct:/box\n3:memory:/box\n1:name=systemd:/box\n")
	write(t, filepath.Join(cg, "cpu,cpuacct", "box", "cpu.cfs_quota_us"), "200000\n")
	write(t, filepath.Join(cg, "cpu,cpuacct", "box", "cpu.cfs_period_us"), "100000\n")
	write(t, filepath.Join(cg, "memory", "box", "memory.limit_in_bytes"), "9223372036854771712\n")
	c, err := hostCapacity(proc, cg, 4)
	if err != nil {
		t.Fatal(err)
	}
	if c.CPU != 2000 || c.Memory != 16000000<<10 {
		t.Errorf("capacity %+v, want 2000m and MemTotal", c)
	}
}

func TestHostCapacityErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := hostCapacity(dir, dir, 1); err == nil {
		t.Error("no error without /proc/meminfo")
	}
	write(t, filepath.Join(dir, "meminfo"), "MemFree: 1 kB\n")
	if _, err := hostCapacity(dir, dir, 1); err == nil {
		t.Error("no error without MemTotal")
	}
}

func TestHostCapacityHere(t *testing.T) {
	c, err := HostCapacity()
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if c.CPU <= 0 || c.Memory <= 0 {
		t.Errorf("HostCapacity = %+v", c)
	}
}
