package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/opencontainers/runc/libcontainer"

	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/container/shim"
)

func loadContainer(root, name string) (*libcontainer.Container, error) {
	return libcontainer.Load(root, name)
}

// adopt rebuilds a pod an earlier Runtime left in the state directory and
// starts watching it. A pod whose Start never completed is an error (the
// caller cleans it away).
func (r *Runtime) adopt(id string) (*pod, error) {
	dir := r.podDir(id)
	p := &pod{id: id, dir: dir, done: make(chan struct{})}
	if err := readJSON(filepath.Join(dir, recordFile), &p.rec); err != nil {
		return nil, fmt.Errorf("read record: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, startedFile)); err != nil {
		return nil, errors.New("start did not complete")
	}
	var ex exitRecord
	if err := readJSON(filepath.Join(dir, exitFile), &ex); err == nil {
		e := ex.Exit
		if ex.Unknown {
			e.Err = runtime.ErrExitUnknown
		}
		for _, c := range podContainers(&p.rec.Spec) {
			p.containers = append(p.containers, &ctr{name: c.Name})
		}
		p.mu.exit, p.mu.finished = &e, ex.FinishedAt
		close(p.done)
		return p, nil
	}
	var sb sandboxRecord
	if err := readJSON(filepath.Join(dir, sandboxFile), &sb); err == nil {
		p.sandbox = adoptPid(sb.Pid, sb.StartTime)
	}
	root := filepath.Join(dir, lcDir)
	for _, cs := range podContainers(&p.rec.Spec) {
		c := &ctr{name: cs.Name}
		p.containers = append(p.containers, c)
		var ce exitRecord
		if err := readJSON(filepath.Join(dir, "exit-"+cs.Name+".json"), &ce); err == nil && len(ce.Exit.Containers) == 1 {
			x := ce.Exit.Containers[0]
			c.exit = &x
			if lc, err := loadContainer(root, cs.Name); err == nil {
				c.lc = lc
			}
			continue
		}
		lc, err := loadContainer(root, cs.Name)
		if err != nil {
			c.exit = &runtime.ContainerExit{Name: cs.Name, Code: -1}
			continue
		}
		c.lc = lc
		st, err := lc.State()
		if err == nil {
			if status, _ := lc.Status(); status == libcontainer.Running || status == libcontainer.Created {
				c.watch = adoptPid(st.InitProcessPid, st.InitProcessStartTime)
			}
		}
		if c.watch != nil && c.watch.exited() {
			// Ended already, for example a zombie: settle it now, so that
			// the pod's first listing is right.
			code, known := shim.Reap(c.watch.pid)
			if !known {
				code = -1
			}
			c.exit = &runtime.ContainerExit{Name: cs.Name, Code: code, OOMKilled: oomKilled(lc)}
			c.watch.close()
			c.watch = nil
			continue
		}
		if c.watch == nil {
			// Ended while no Runtime watched; its status is known only if
			// it is still our unreaped child.
			code, known := -1, false
			if err == nil {
				if s, serr := procStartTime(st.InitProcessPid); serr == nil && s == st.InitProcessStartTime {
					code, known = shim.Reap(st.InitProcessPid)
				}
			}
			if !known {
				code = -1
			}
			c.exit = &runtime.ContainerExit{Name: cs.Name, Code: code, OOMKilled: oomKilled(lc)}
		}
	}
	p.mu.left = len(slices.DeleteFunc(slices.Clone(p.containers), func(c *ctr) bool { return c.watch == nil }))
	if p.rec.Spec.Placeholder && p.sandbox != nil {
		r.watch(p) // a capbox's placeholder lives as long as its sandbox
		return p, nil
	}
	if p.mu.left == 0 {
		// Every container ended while away: finish now, so that New
		// reports the pod as exited.
		r.finish(p)
		return p, nil
	}
	r.watch(p)
	return p, nil
}
