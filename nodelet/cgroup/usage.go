package cgroup

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Usage is the lean reading the overcommit loop takes every period: three
// small files per pod in v1 (cpuacct.usage, memory.usage_in_bytes,
// memory.stat), three in v2 (cpu.stat, memory.current, memory.stat).
// Sample (through containerd's Stat) reads about sixteen files and starts a
// goroutine per controller; at 100 pods per second that alone cost several
// percent of a core, which is why this path reads the files directly.
type Usage struct {
	CPUUsageNS       uint64
	MemoryUsage      uint64
	MemoryWorkingSet uint64
}

// PodUsage reads a pod's CPU time and memory working set.
func (m *Manager) PodUsage(t Tier, podID string) (Usage, error) {
	p, err := m.podPath(t, podID)
	if err != nil {
		return Usage{}, err
	}
	return m.usage(p)
}

// TierUsage reads a tier's CPU time and memory working set.
func (m *Manager) TierUsage(t Tier) (Usage, error) {
	p, err := m.tierPath(t)
	if err != nil {
		return Usage{}, err
	}
	return m.usage(p)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 8192); return &b }}

func (m *Manager) usage(p string) (Usage, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	var u Usage
	var cpuFile, cpuKey, memFile, inactiveKey string
	var ctlCPU, ctlMem string
	switch b := m.be.(type) {
	case *v1:
		ctlCPU, ctlMem = "cpuacct", "memory"
		cpuFile = filepath.Join(b.mount, "cpuacct", p, "cpuacct.usage")
		memFile = filepath.Join(b.mount, "memory", p, "memory.usage_in_bytes")
		inactiveKey = "total_inactive_file"
	case *v2:
		ctlCPU, ctlMem = "cpu", "memory"
		cpuFile, cpuKey = filepath.Join(b.mount, p, "cpu.stat"), "usage_usec"
		memFile = filepath.Join(b.mount, p, "memory.current")
		inactiveKey = "inactive_file"
	}
	fail := func(ctl string, err error) (Usage, error) {
		if errors.Is(err, fs.ErrNotExist) {
			err = ErrNotFound
		}
		return Usage{}, &Error{Op: "read usage", Path: p, Controller: ctl, Err: err}
	}
	raw, err := readInto(bp, cpuFile)
	if err != nil {
		return fail(ctlCPU, err)
	}
	if cpuKey == "" {
		u.CPUUsageNS, err = parseUintBytes(bytes.TrimSpace(raw))
	} else {
		var us uint64
		us, err = findKey(raw, cpuKey)
		u.CPUUsageNS = us * 1000
	}
	if err != nil {
		return fail(ctlCPU, err)
	}
	if raw, err = readInto(bp, memFile); err != nil {
		return fail(ctlMem, err)
	}
	if u.MemoryUsage, err = parseUintBytes(bytes.TrimSpace(raw)); err != nil {
		return fail(ctlMem, err)
	}
	if raw, err = readInto(bp, filepath.Join(filepath.Dir(memFile), "memory.stat")); err != nil {
		return fail(ctlMem, err)
	}
	inactive, err := findKey(raw, inactiveKey)
	if err != nil {
		return fail(ctlMem, err)
	}
	u.MemoryWorkingSet = u.MemoryUsage - min(u.MemoryUsage, inactive)
	return u, nil
}

// readInto reads a small file into *bp, growing it if needed. It uses the
// raw system calls (open, read, close: no poller registration, which the
// profile showed to matter at 300 files a second). A short read ends it:
// cgroup files are seq_files, which fill the buffer up to its size or to
// the end in one read, so the usual extra read for EOF is skipped.
func readInto(bp *[]byte, name string) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	defer syscall.Close(fd)
	b := (*bp)[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		room := cap(b) - len(b)
		n, err := syscall.Read(fd, b[len(b):cap(b)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		b = b[:len(b)+n]
		*bp = b
		if n < room {
			return b, nil
		}
	}
}

// findKey returns the value of "key value" in a flat-keyed file.
func findKey(raw []byte, key string) (uint64, error) {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if len(line) > len(key) && line[len(key)] == ' ' && string(line[:len(key)]) == key {
			return parseUintBytes(bytes.TrimSpace(line[len(key)+1:]))
		}
	}
	return 0, errors.New("no " + key + " line")
}

func parseUintBytes(b []byte) (uint64, error) {
	return strconv.ParseUint(string(b), 10, 64)
}
