package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"time"
)

// v2 implements backend on the unified hierarchy. It writes the cgroup2
// interface files directly: containerd's cgroup2 package imports
// github.com/containerd/log, which this module's go.sum does not carry (and
// go.mod is not this package's to change). The file formats are those of
// Documentation/admin-guide/cgroup-v2.rst; cgroup2's semantics are kept
// (shares→weight conversion, "max" for unlimited, recursive delete).
type v2 struct {
	mount string
}

func newV2(mount string) *v2 { return &v2{mount: mount} }

// wanted are the controllers enabled down the tree so that tiers and pods
// can be limited.
var wanted = []string{"cpu", "memory", "pids", "io"}

func (b *v2) dir(p string) string { return filepath.Join(b.mount, p) }

func (b *v2) exists(p string) bool {
	st, err := os.Stat(b.dir(p))
	return err == nil && st.IsDir()
}

func (b *v2) notFound(op, p string) error { return &Error{Op: op, Path: p, Err: ErrNotFound} }

func (b *v2) wrap(op, p string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Op: op, Path: p, Controller: controllerOf(b.mount, err), Err: err}
}

// sharesToWeight converts v1 cpu.shares to v2 cpu.weight as runc does.
func sharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	shares = min(max(shares, 2), 262144)
	return 1 + ((shares-2)*9999)/262142
}

// weightToShares inverts sharesToWeight (up to rounding).
func weightToShares(w uint64) uint64 {
	if w == 0 {
		return 0
	}
	return 2 + ((w-1)*262142+9998)/9999
}

func (b *v2) create(p string, l Limits) error {
	// Enable the controllers this host offers in every ancestor's
	// subtree_control so that p (and, for tiers, its children) can be limited.
	raw, err := os.ReadFile(filepath.Join(b.mount, "cgroup.controllers"))
	if err != nil {
		return b.wrap("create", p, err)
	}
	var on []string
	for _, c := range wanted {
		if slices.Contains(strings.Fields(string(raw)), c) {
			on = append(on, "+"+c)
		}
	}
	cur := "/"
	for _, elem := range strings.Split(strings.Trim(p, "/"), "/") {
		if len(on) > 0 {
			if err := os.WriteFile(filepath.Join(b.dir(cur), "cgroup.subtree_control"), []byte(strings.Join(on, " ")), 0); err != nil {
				return b.wrap("create", p, err)
			}
		}
		cur = filepath.Join(cur, elem)
		if err := os.Mkdir(b.dir(cur), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return b.wrap("create", p, err)
		}
	}
	return b.set("create", p, l)
}

func (b *v2) update(p string, l Limits) error {
	if !b.exists(p) {
		return b.notFound("update", p)
	}
	return b.set("update", p, l)
}

func (b *v2) set(op, p string, l Limits) error {
	d := b.dir(p)
	write := func(file, val string) error {
		if err := os.WriteFile(filepath.Join(d, file), []byte(val), 0); err != nil {
			return b.wrap(op, p, err)
		}
		return nil
	}
	if l.CPUShares != 0 {
		if err := write("cpu.weight", strconv.FormatUint(sharesToWeight(l.CPUShares), 10)); err != nil {
			return err
		}
	}
	if l.CPUIdle != 0 {
		if err := setCPUIdle(d, l.CPUIdle); err != nil {
			return &Error{Op: op, Path: p, Controller: "cpu", Err: err}
		}
	}
	if l.CPUQuotaUS != 0 || l.CPUPeriodUS != 0 {
		cur, err := b.limits(p)
		if err != nil {
			return err
		}
		q, per := l.CPUQuotaUS, l.CPUPeriodUS
		if q == 0 {
			q = cur.CPUQuotaUS
		}
		if per == 0 {
			per = cur.CPUPeriodUS
		}
		if per == 0 {
			per = 100000
		}
		qs := "max"
		if q > 0 {
			qs = strconv.FormatInt(q, 10)
		}
		if err := write("cpu.max", qs+" "+strconv.FormatUint(per, 10)); err != nil {
			return err
		}
	}
	if l.MemoryLimit != 0 {
		if err := write("memory.max", maxOr(l.MemoryLimit)); err != nil {
			return err
		}
	}
	if l.PidsMax != 0 {
		if err := write("pids.max", maxOr(l.PidsMax)); err != nil {
			return err
		}
	}
	if l.IOWeight != 0 {
		f, err := b.ioWeightFile(p)
		if err != nil {
			return &Error{Op: op, Path: p, Controller: "io", Err: err}
		}
		if err := os.WriteFile(f, []byte(strconv.FormatUint(uint64(l.IOWeight), 10)), 0); err != nil {
			return &Error{Op: op, Path: p, Controller: "io", Err: err}
		}
	}
	return nil
}

func maxOr(v int64) string {
	if v < 0 {
		return "max"
	}
	return strconv.FormatInt(v, 10)
}

func (b *v2) ioWeightFile(p string) (string, error) {
	for _, f := range []string{"io.bfq.weight", "io.weight"} {
		if fileExists(filepath.Join(b.dir(p), f)) {
			return filepath.Join(b.dir(p), f), nil
		}
	}
	return "", fmt.Errorf("no io.bfq.weight or io.weight in %s: %w", b.dir(p), ErrUnsupported)
}

func (b *v2) limits(p string) (Limits, error) {
	if !b.exists(p) {
		return Limits{}, b.notFound("read limits", p)
	}
	var l Limits
	d := b.dir(p)
	if raw, err := os.ReadFile(filepath.Join(d, "cpu.max")); err == nil {
		f := strings.Fields(string(raw))
		if len(f) == 2 {
			l.CPUQuotaUS = -1
			if f[0] != "max" {
				l.CPUQuotaUS, _ = strconv.ParseInt(f[0], 10, 64)
			}
			l.CPUPeriodUS, _ = strconv.ParseUint(f[1], 10, 64)
		}
	}
	if w, err := readInt(filepath.Join(d, "cpu.weight")); err == nil {
		l.CPUShares = weightToShares(uint64(w))
	}
	l.CPUIdle = readCPUIdle(d)
	if v, err := readInt(filepath.Join(d, "memory.max")); err == nil {
		l.MemoryLimit = v
	}
	if v, err := readInt(filepath.Join(d, "pids.max")); err == nil {
		l.PidsMax = v
	}
	if f, err := b.ioWeightFile(p); err == nil {
		if v, err := readInt(f); err == nil {
			l.IOWeight = uint16(v)
		}
	}
	return l, nil
}

func (b *v2) stat(p string) (Sample, error) {
	if !b.exists(p) {
		return Sample{}, b.notFound("stat", p)
	}
	d := b.dir(p)
	var s Sample
	kv, err := readKV(filepath.Join(d, "cpu.stat"))
	if err != nil {
		return Sample{}, &Error{Op: "stat", Path: p, Controller: "cpu", Err: err}
	}
	s.CPUUsageNS = kv["usage_usec"] * 1000
	s.CPUPeriods, s.CPUThrottled, s.CPUThrottledNS = kv["nr_periods"], kv["nr_throttled"], kv["throttled_usec"]*1000
	if v, err := readInt(filepath.Join(d, "memory.current")); err == nil {
		s.MemoryUsage = uint64(v)
		ms, err := readKV(filepath.Join(d, "memory.stat"))
		if err != nil {
			return Sample{}, &Error{Op: "stat", Path: p, Controller: "memory", Err: err}
		}
		s.MemoryWorkingSet = s.MemoryUsage - min(s.MemoryUsage, ms["inactive_file"])
		if v, err := readInt(filepath.Join(d, "memory.max")); err == nil && v > 0 {
			s.MemoryLimit = uint64(v)
		} else {
			s.MemoryLimit = 1<<63 - 1
		}
		if ev, err := readKV(filepath.Join(d, "memory.events")); err == nil {
			s.OOMKills, s.OOMEvents = ev["oom_kill"], ev["oom"]
		}
	}
	if v, err := readInt(filepath.Join(d, "pids.current")); err == nil {
		s.Pids = uint64(v)
		if v, err := readInt(filepath.Join(d, "pids.max")); err == nil && v > 0 {
			s.PidsLimit = uint64(v)
		}
	}
	return s, nil
}

// readKV parses a flat-keyed cgroup file ("key value" lines).
func readKV(path string) (map[string]uint64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64, 16)
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

func (b *v2) addProc(p string, pid int) error {
	if !b.exists(p) {
		return b.notFound("add process", p)
	}
	err := os.WriteFile(filepath.Join(b.dir(p), "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
	return b.wrap("add process", p, err)
}

func (b *v2) procs(p string) ([]int, error) {
	if !b.exists(p) {
		return nil, b.notFound("list processes", p)
	}
	rels, err := subtree([]string{b.dir(p)})
	if err != nil {
		return nil, &Error{Op: "list processes", Path: p, Err: err}
	}
	var out []int
	for _, rel := range rels {
		raw, err := os.ReadFile(filepath.Join(b.dir(p), rel, "cgroup.procs"))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, b.wrap("list processes", p, err)
		}
		for _, f := range strings.Fields(string(raw)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (b *v2) children(p string) ([]string, error) {
	return childDirs(b.dir(p), func() error { return b.notFound("list", p) })
}

func (b *v2) remove(p string) error {
	rels, err := subtree([]string{b.dir(p)})
	if err != nil {
		return &Error{Op: "delete", Path: p, Err: err}
	}
	if len(rels) == 0 {
		return b.notFound("delete", p)
	}
	if ps, err := b.procs(p); err == nil && len(ps) > 0 {
		return &Error{Op: "delete", Path: p, Err: fmt.Errorf("still contains %d processes (first pid %d)", len(ps), ps[0])}
	}
	for _, rel := range rels {
		q := filepath.Join(p, rel)
		if err := rmdirRetry(b.dir(q)); err != nil {
			return b.wrap("delete", q, err)
		}
	}
	return nil
}

// rmdirRetry removes an empty cgroup directory, retrying briefly on EBUSY
// (the kernel may still be tearing down exited tasks), as cgroup2 does.
func rmdirRetry(dir string) error {
	delay := 10 * time.Millisecond
	var err error
	for range 5 {
		err = os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(delay)
		delay *= 2
	}
	return err
}
