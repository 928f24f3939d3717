package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// PodUsage reads a pod's CPU time and memory working set. It leaves the
// pod's usage files open, and the next call reads them again from the
// start instead of opening them: opening a cgroup file (a path walk through
// the cgroup file system) costs twice what reading it does. EndUsageRound
// closes the files of the pods not read since the round before, DeletePod
// and Delete close those they remove, and Close closes them all. A file of
// a cgroup removed meanwhile reads ENODEV; the pod's files are then opened
// again, and ErrNotFound is returned if the cgroup is gone.
func (m *Manager) PodUsage(t Tier, podID string) (Usage, error) {
	p, err := m.podPath(t, podID)
	if err != nil {
		return Usage{}, err
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	spec := m.usageFiles(p)
	m.open.Lock()
	defer m.open.Unlock()
	if m.open.files == nil {
		m.open.files = map[string]*openUsage{}
	}
	for attempt := 0; ; attempt++ {
		f := m.open.files[p]
		if f == nil {
			f = &openUsage{}
			for i, name := range spec.names {
				fd, err := openRead(name)
				if err != nil {
					f.close()
					return spec.fail(i, err)
				}
				f.fds[i] = fd
				f.n++
			}
			m.open.files[p] = f
		}
		f.read = true
		u, i, err := spec.parse(func(i int) ([]byte, error) { return preadInto(bp, f.fds[i], spec.names[i]) })
		if err != nil && errors.Is(err, syscall.ENODEV) && attempt == 0 {
			// Removed since it was opened (perhaps created again since).
			f.close()
			delete(m.open.files, p)
			continue
		}
		if err != nil {
			return spec.fail(i, err)
		}
		return u, nil
	}
}

// EndUsageRound closes the usage files of every pod PodUsage has not read
// since the previous EndUsageRound. The overcommit loop calls it after each
// period's readings, so that the files of pods that are gone (which keep
// their dying cgroups in the kernel's memory) stay open one period at most.
func (m *Manager) EndUsageRound() {
	m.open.Lock()
	defer m.open.Unlock()
	for p, f := range m.open.files {
		if !f.read {
			f.close()
			delete(m.open.files, p)
			continue
		}
		f.read = false
	}
}

// Close closes every usage file PodUsage left open. The Manager stays
// usable.
func (m *Manager) Close() {
	m.closeUsage(func(string) bool { return true })
}

// closeUsage closes the usage files of the cgroup paths that match.
func (m *Manager) closeUsage(match func(p string) bool) {
	m.open.Lock()
	defer m.open.Unlock()
	for p, f := range m.open.files {
		if match(p) {
			f.close()
			delete(m.open.files, p)
		}
	}
}

// TierUsage reads a tier's CPU time and memory working set (opening and
// closing its files).
func (m *Manager) TierUsage(t Tier) (Usage, error) {
	p, err := m.tierPath(t)
	if err != nil {
		return Usage{}, err
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	spec := m.usageFiles(p)
	u, i, err := spec.parse(func(i int) ([]byte, error) { return readInto(bp, spec.names[i]) })
	if err != nil {
		return spec.fail(i, err)
	}
	return u, nil
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 8192); return &b }}

// openUsage is a pod's open usage files (see usageSpec), and whether they
// were read in the current round.
type openUsage struct {
	fds  [3]int
	n    int // how many of fds are open
	read bool
}

func (f *openUsage) close() {
	for _, fd := range f.fds[:f.n] {
		syscall.Close(fd)
	}
	f.n = 0
}

// usageSpec names a cgroup's three usage files — CPU time, memory usage,
// memory.stat — and what to read in them.
type usageSpec struct {
	path        string
	names       [3]string
	ctls        [3]string // the controller of each file, for errors
	cpuKey      string    // the CPU time's key in a flat-keyed file (v2), or "" for a bare number (v1)
	inactiveKey string
}

func (m *Manager) usageFiles(p string) usageSpec {
	switch b := m.be.(type) {
	case *v1:
		mem := filepath.Join(b.mount, "memory", p)
		return usageSpec{path: p,
			names:       [3]string{filepath.Join(b.mount, "cpuacct", p, "cpuacct.usage"), filepath.Join(mem, "memory.usage_in_bytes"), filepath.Join(mem, "memory.stat")},
			ctls:        [3]string{"cpuacct", "memory", "memory"},
			inactiveKey: "total_inactive_file"}
	default:
		dir := m.be.(*v2).dir(p)
		return usageSpec{path: p,
			names:  [3]string{filepath.Join(dir, "cpu.stat"), filepath.Join(dir, "memory.current"), filepath.Join(dir, "memory.stat")},
			ctls:   [3]string{"cpu", "memory", "memory"},
			cpuKey: "usage_usec", inactiveKey: "inactive_file"}
	}
}

// parse reads the three files with read and returns the usage, or the
// index of the file that failed and why.
func (s *usageSpec) parse(read func(i int) ([]byte, error)) (Usage, int, error) {
	var u Usage
	raw, err := read(0)
	if err != nil {
		return u, 0, err
	}
	if s.cpuKey == "" {
		u.CPUUsageNS, err = parseUintBytes(bytes.TrimSpace(raw))
	} else {
		var us uint64
		us, err = findKey(raw, s.cpuKey)
		u.CPUUsageNS = us * 1000
	}
	if err != nil {
		return u, 0, err
	}
	if raw, err = read(1); err != nil {
		return u, 1, err
	}
	if u.MemoryUsage, err = parseUintBytes(bytes.TrimSpace(raw)); err != nil {
		return u, 1, err
	}
	if raw, err = read(2); err != nil {
		return u, 2, err
	}
	inactive, err := findKey(raw, s.inactiveKey)
	if err != nil {
		return u, 2, err
	}
	u.MemoryWorkingSet = u.MemoryUsage - min(u.MemoryUsage, inactive)
	return u, -1, nil
}

// fail wraps the error of file i.
func (s *usageSpec) fail(i int, err error) (Usage, error) {
	if errors.Is(err, fs.ErrNotExist) {
		err = ErrNotFound
	}
	return Usage{}, &Error{Op: "read usage", Path: s.path, Controller: s.ctls[i], Err: err}
}

// readInto reads a small file into *bp, growing it if needed. It uses the
// raw system calls (open, read, close: no poller registration, which the
// profile showed to matter at 300 files a second).
func readInto(bp *[]byte, name string) ([]byte, error) {
	fd, err := openRead(name)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	return preadInto(bp, fd, name)
}

func openRead(name string) (int, error) {
	for {
		fd, err := syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return fd, nil
	}
}

// preadInto reads the file open as fd from its start into *bp, growing it
// if needed. A short read ends it: cgroup files are seq_files, which fill
// the buffer up to its size or to the end in one read, so the usual extra
// read for EOF is skipped; reading one again from offset 0 generates its
// content afresh.
func preadInto(bp *[]byte, fd int, name string) ([]byte, error) {
	b := (*bp)[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		room := cap(b) - len(b)
		n, err := syscall.Pread(fd, b[len(b):cap(b)], int64(len(b)))
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

// setCPUIdle writes cpu.idle in the cpu directory dir: 1 for idle > 0, 0
// for idle < 0. A kernel without the file gives ErrUnsupported.
func setCPUIdle(dir string, idle int8) error {
	f := filepath.Join(dir, "cpu.idle")
	if !fileExists(f) {
		return fmt.Errorf("no cpu.idle in %s (Linux 5.15 or later has it): %w", dir, ErrUnsupported)
	}
	v := "0"
	if idle > 0 {
		v = "1"
	}
	return os.WriteFile(f, []byte(v), 0)
}

// readCPUIdle reads cpu.idle in the cpu directory dir: 1 when set, 0
// when clear or when the kernel has no such file.
func readCPUIdle(dir string) int8 {
	if v, err := readInt(filepath.Join(dir, "cpu.idle")); err == nil && v != 0 {
		return 1
	}
	return 0
}

// prepareIdle orders l's weight and idle mark for the cpu directory dir.
// The kernel refuses a weight for a group marked idle (EINVAL); while the
// mark is on it uses and reports its own idle weight, and clearing the
// mark resets the weight to the default (1024 shares, weight 100). So a
// mark being cleared is cleared here, before the weight is written (and
// CPUIdle is zeroed); a weight for a group that is and stays idle is
// dropped (CPUShares is zeroed); a mark being set is left in CPUIdle, to
// be written after the weight.
func prepareIdle(dir string, l Limits) (Limits, error) {
	switch {
	case l.CPUIdle < 0:
		if err := setCPUIdle(dir, -1); err != nil {
			return l, err
		}
		l.CPUIdle = 0
	case l.CPUShares != 0 && readCPUIdle(dir) == 1:
		l.CPUShares = 0
	}
	return l, nil
}
