package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// v1 implements backend on the legacy hierarchies through cgroup1.
type v1 struct {
	mount string
	ctl   []cgroup1.Subsystem // written and joined: cpu, cpuacct, memory, pids, blkio, freezer
	stats []cgroup1.Subsystem // read for samples: cpu, cpuacct, memory, pids
	all   []cgroup1.Subsystem // every mounted hierarchy, for Delete
}

type pather interface{ Path(string) string }

func newV1(mount string) (*v1, error) {
	present := func(ss ...cgroup1.Subsystem) []cgroup1.Subsystem {
		var out []cgroup1.Subsystem
		for _, s := range ss {
			if p, ok := s.(pather); ok {
				if _, err := os.Lstat(p.Path("/")); err == nil {
					out = append(out, s)
				}
			}
		}
		return out
	}
	mem := cgroup1.NewMemory(mount, cgroup1.OptionalSwap(), cgroup1.IgnoreModules("kmem", "kmem.tcp"))
	b := &v1{mount: mount}
	b.ctl = present(cgroup1.NewCpu(mount), cgroup1.NewCpuacct(mount), mem,
		cgroup1.NewPids(mount), cgroup1.NewBlkio(mount), cgroup1.NewFreezer(mount))
	b.stats = present(cgroup1.NewCpu(mount), cgroup1.NewCpuacct(mount), mem, cgroup1.NewPids(mount))
	all := []cgroup1.Subsystem{
		cgroup1.NewNamed(mount, "systemd"), cgroup1.NewFreezer(mount), cgroup1.NewPids(mount),
		cgroup1.NewNetCls(mount), cgroup1.NewNetPrio(mount), cgroup1.NewPerfEvent(mount),
		cgroup1.NewCpuset(mount), cgroup1.NewCpu(mount), cgroup1.NewCpuacct(mount), mem,
		cgroup1.NewBlkio(mount), cgroup1.NewRdma(mount), cgroup1.NewDevices(mount),
	}
	if h, err := cgroup1.NewHugetlb(mount); err == nil {
		all = append(all, h)
	}
	b.all = present(all...)
	for _, need := range []cgroup1.Name{cgroup1.Cpu, cgroup1.Cpuacct, cgroup1.Memory} {
		if !slices.ContainsFunc(b.ctl, func(s cgroup1.Subsystem) bool { return s.Name() == need }) {
			return nil, fmt.Errorf("cgroup: v1 hierarchy %s not mounted under %s", need, mount)
		}
	}
	return b, nil
}

func (b *v1) dir(ctl cgroup1.Name, p string) string {
	return filepath.Join(b.mount, string(ctl), p)
}

func (b *v1) hierarchy(ss []cgroup1.Subsystem) cgroup1.InitOpts {
	return cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) { return ss, nil })
}

func (b *v1) exists(p string) bool {
	st, err := os.Stat(b.dir(cgroup1.Cpu, p))
	return err == nil && st.IsDir()
}

func (b *v1) notFound(op, p string) error {
	return &Error{Op: op, Path: p, Controller: string(cgroup1.Cpu), Err: ErrNotFound}
}

// wrap turns a library or file error into an *Error naming the controller
// whose file failed, when the error carries a path.
func (b *v1) wrap(op, p string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Op: op, Path: p, Controller: controllerOf(b.mount, err), Err: err}
}

// controllerOf names the controller whose file failed, from the path of a
// *fs.PathError: <mount>/<controller>/... in v1, <mount>/.../<controller>.<file>
// in v2.
func controllerOf(mount string, err error) string {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return ""
	}
	rel, ok := strings.CutPrefix(pe.Path, mount+"/")
	if !ok {
		return ""
	}
	if fileExists(filepath.Join(mount, "cgroup.controllers")) { // v2
		c, _, _ := strings.Cut(filepath.Base(rel), ".")
		return c
	}
	first, _, _ := strings.Cut(rel, "/")
	return first
}

func (b *v1) create(p string, l Limits) error {
	if _, err := cgroup1.New(cgroup1.StaticPath(p), &specs.LinuxResources{}, b.hierarchy(b.ctl)); err != nil {
		return b.wrap("create", p, err)
	}
	return b.set("create", p, l)
}

func (b *v1) update(p string, l Limits) error {
	if !b.exists(p) {
		return b.notFound("update", p)
	}
	return b.set("update", p, l)
}

func (b *v1) set(op, p string, l Limits) error {
	l, err := prepareIdle(b.dir(cgroup1.Cpu, p), l)
	if err != nil {
		return &Error{Op: op, Path: p, Controller: string(cgroup1.Cpu), Err: err}
	}
	res := &specs.LinuxResources{}
	if l.CPUShares != 0 || l.CPUPeriodUS != 0 || l.CPUQuotaUS != 0 {
		res.CPU = &specs.LinuxCPU{}
		if l.CPUShares != 0 {
			res.CPU.Shares = &l.CPUShares
		}
		if l.CPUPeriodUS != 0 {
			res.CPU.Period = &l.CPUPeriodUS
		}
		if l.CPUQuotaUS != 0 {
			q := l.CPUQuotaUS
			if q < 0 {
				q = -1
			}
			res.CPU.Quota = &q
		}
	}
	if l.MemoryLimit != 0 {
		m := l.MemoryLimit
		if m < 0 {
			m = -1
		}
		res.Memory = &specs.LinuxMemory{Limit: &m}
	}
	if l.PidsMax > 0 {
		res.Pids = &specs.LinuxPids{Limit: &l.PidsMax}
	}
	cg, err := cgroup1.Load(cgroup1.StaticPath(p), b.hierarchy(b.ctl))
	if err != nil {
		return b.wrap(op, p, err)
	}
	if err := cg.Update(res); err != nil {
		return b.wrap(op, p, err)
	}
	if l.PidsMax < 0 {
		if err := os.WriteFile(filepath.Join(b.dir(cgroup1.Pids, p), "pids.max"), []byte("max"), 0); err != nil {
			return b.wrap(op, p, err)
		}
	}
	if l.IOWeight != 0 {
		if err := b.setIOWeight(p, l.IOWeight); err != nil {
			return &Error{Op: op, Path: p, Controller: string(cgroup1.Blkio), Err: err}
		}
	}
	if l.CPUIdle > 0 {
		if err := setCPUIdle(b.dir(cgroup1.Cpu, p), l.CPUIdle); err != nil {
			return &Error{Op: op, Path: p, Controller: string(cgroup1.Cpu), Err: err}
		}
	}
	return nil
}

// ioWeightFile returns the weight file the kernel offers: blkio.weight
// (CFQ, old kernels) or blkio.bfq.weight (BFQ).
func (b *v1) ioWeightFile(p string) (string, error) {
	d := b.dir(cgroup1.Blkio, p)
	for _, f := range []string{"blkio.weight", "blkio.bfq.weight"} {
		if fileExists(filepath.Join(d, f)) {
			return filepath.Join(d, f), nil
		}
	}
	return "", fmt.Errorf("no blkio.weight or blkio.bfq.weight in %s: %w", d, ErrUnsupported)
}

func (b *v1) setIOWeight(p string, w uint16) error {
	f, err := b.ioWeightFile(p)
	if err != nil {
		return err
	}
	return os.WriteFile(f, []byte(strconv.FormatUint(uint64(w), 10)), 0)
}

func (b *v1) limits(p string) (Limits, error) {
	if !b.exists(p) {
		return Limits{}, b.notFound("read limits", p)
	}
	var l Limits
	var err error
	read := func(ctl cgroup1.Name, file string) int64 {
		if err != nil {
			return 0
		}
		var v int64
		v, err = readInt(filepath.Join(b.dir(ctl, p), file))
		if err != nil {
			err = &Error{Op: "read limits", Path: p, Controller: string(ctl), Err: err}
		}
		return v
	}
	l.CPUQuotaUS = read(cgroup1.Cpu, "cpu.cfs_quota_us")
	l.CPUPeriodUS = uint64(read(cgroup1.Cpu, "cpu.cfs_period_us"))
	l.CPUShares = uint64(read(cgroup1.Cpu, "cpu.shares"))
	l.CPUIdle = readCPUIdle(b.dir(cgroup1.Cpu, p))
	l.MemoryLimit = read(cgroup1.Memory, "memory.limit_in_bytes")
	if l.MemoryLimit >= 1<<62 {
		l.MemoryLimit = -1
	}
	if b.has(cgroup1.Pids) {
		l.PidsMax = read(cgroup1.Pids, "pids.max")
	}
	if err != nil {
		return Limits{}, err
	}
	if f, ferr := b.ioWeightFile(p); ferr == nil {
		w, werr := readInt(f)
		if werr != nil {
			return Limits{}, &Error{Op: "read limits", Path: p, Controller: string(cgroup1.Blkio), Err: werr}
		}
		l.IOWeight = uint16(w)
	}
	return l, nil
}

func (b *v1) has(n cgroup1.Name) bool {
	return slices.ContainsFunc(b.ctl, func(s cgroup1.Subsystem) bool { return s.Name() == n })
}

func (b *v1) stat(p string) (Sample, error) {
	if !b.exists(p) {
		return Sample{}, b.notFound("stat", p)
	}
	cg, err := cgroup1.Load(cgroup1.StaticPath(p), b.hierarchy(b.stats))
	if err != nil {
		if errors.Is(err, cgroup1.ErrCgroupDeleted) {
			return Sample{}, b.notFound("stat", p)
		}
		return Sample{}, b.wrap("stat", p, err)
	}
	m, err := cg.Stat(cgroup1.IgnoreNotExist)
	if err != nil {
		return Sample{}, b.wrap("stat", p, err)
	}
	var s Sample
	s.CPUUsageNS = m.GetCPU().GetUsage().GetTotal()
	th := m.GetCPU().GetThrottling()
	s.CPUPeriods, s.CPUThrottled, s.CPUThrottledNS = th.GetPeriods(), th.GetThrottledPeriods(), th.GetThrottledTime()
	mem := m.GetMemory()
	s.MemoryUsage = mem.GetUsage().GetUsage()
	s.MemoryLimit = mem.GetUsage().GetLimit()
	s.MemoryWorkingSet = s.MemoryUsage - min(s.MemoryUsage, mem.GetTotalInactiveFile())
	s.Pids, s.PidsLimit = m.GetPids().GetCurrent(), m.GetPids().GetLimit()
	oom := m.GetMemoryOomControl()
	s.OOMKills, s.OOMEvents = oom.GetOomKill(), oom.GetUnderOom()
	return s, nil
}

func (b *v1) addProc(p string, pid int) error {
	if !b.exists(p) {
		return b.notFound("add process", p)
	}
	cg, err := cgroup1.Load(cgroup1.StaticPath(p), b.hierarchy(b.ctl))
	if err != nil {
		return b.wrap("add process", p, err)
	}
	return b.wrap("add process", p, cg.AddProc(uint64(pid)))
}

func (b *v1) procs(p string) ([]int, error) {
	if !b.exists(p) {
		return nil, b.notFound("list processes", p)
	}
	cg, err := cgroup1.Load(cgroup1.StaticPath(p), b.hierarchy(b.stats))
	if err != nil {
		return nil, b.wrap("list processes", p, err)
	}
	ps, err := cg.Processes(cgroup1.Cpu, true)
	if err != nil {
		return nil, b.wrap("list processes", p, err)
	}
	out := make([]int, 0, len(ps))
	for _, pr := range ps {
		out = append(out, pr.Pid)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (b *v1) children(p string) ([]string, error) {
	return childDirs(b.dir(cgroup1.Cpu, p), func() error { return b.notFound("list", p) })
}

// remove deletes p and its descendants from every mounted hierarchy,
// deepest first.
func (b *v1) remove(p string) error {
	var roots []string
	for _, s := range b.all {
		roots = append(roots, s.(pather).Path(p))
	}
	rels, err := subtree(roots)
	if err != nil {
		return &Error{Op: "delete", Path: p, Err: err}
	}
	if len(rels) == 0 {
		return &Error{Op: "delete", Path: p, Err: ErrNotFound}
	}
	for _, rel := range rels {
		q := filepath.Join(p, rel)
		cg, err := cgroup1.Load(cgroup1.StaticPath(q), b.hierarchy(b.all))
		if errors.Is(err, cgroup1.ErrCgroupDeleted) {
			continue
		}
		if err != nil {
			return b.wrap("delete", q, err)
		}
		if err := cg.Delete(); err != nil {
			return b.wrap("delete", q, err)
		}
	}
	return nil
}

// subtree returns the relative paths ("." for the top) of every directory
// under any of roots, deepest first, without duplicates.
func subtree(roots []string) ([]string, error) {
	seen := map[string]bool{}
	for _, r := range roots {
		err := filepath.WalkDir(r, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				rel, _ := filepath.Rel(r, path)
				seen[rel] = true
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	depth := func(s string) int {
		if s == "." {
			return 0
		}
		return strings.Count(s, "/") + 1
	}
	slices.SortFunc(out, func(a, b string) int {
		if d := depth(b) - depth(a); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return out, nil
}

func childDirs(dir string, notFound func() error) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, notFound()
		}
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// readInt reads a cgroup file holding one integer, "max" (returned as -1),
// or "default N" lines as BFQ writes them (the default is returned).
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("%s: empty", path)
	}
	v := f[0]
	if v == "default" && len(f) > 1 {
		v = f[1]
	}
	if v == "max" {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		u, uerr := strconv.ParseUint(v, 10, 64)
		if uerr != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		return int64(min(u, 1<<63-1)), nil
	}
	return n, nil
}
