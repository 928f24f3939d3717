package container

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/container/shim"
)

// sandboxTimeout bounds how long the pause process may take to report.
const sandboxTimeout = 10 * time.Second

// startSandbox starts p's pause process in new IPC and UTS namespaces, a
// new network namespace unless the pod's network is the host's, and a new
// PID namespace for a pod that shares one (whose
// PID 1 it is, so the namespace lives as long as the pod), and sets
// p.sandbox. It returns once the process exists, so
// that its namespaces can be joined; the rest (the pause reporting that
// the hostname is set and lo is up, recording it, moving it into the
// cgroup PARENT/ID/_sandbox) goes on in the background, and ready reports
// its outcome exactly once. The caller must receive from ready before it
// lets a container's program run, and before it cleans the pod away.
func (r *Runtime) startSandbox(p *pod) (ready <-chan error, err error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/proc/self/exe", pauseArg, p.id)
	cmd.Args[0] = os.Args[0]
	cmd.Stdout = pw
	cmd.Env = []string{}
	flags := uintptr(unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if p.rec.Spec.Network != runtime.NetworkHost {
		flags |= unix.CLONE_NEWNET
	}
	if p.rec.Spec.SharePID {
		flags |= unix.CLONE_NEWPID
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: flags,
		Setpgid:    true, // a terminal's Ctrl-C goes to the nodelet, which stops pods itself
	}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("start pause: %w", err)
	}
	pid := cmd.Process.Pid
	if p.sandbox, err = watchPid(pid); err != nil {
		pr.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		defer pr.Close()
		if err := r.sandboxReady(p, pr, pid); err != nil {
			done <- fmt.Errorf("sandbox: %w", err)
			return
		}
		done <- nil
	}()
	return done, nil
}

// sandboxReady waits for the pause process pid of p to report on pr, then
// records it and moves it into its cgroup.
func (r *Runtime) sandboxReady(p *pod, pr *os.File, pid int) error {
	_ = pr.SetReadDeadline(time.Now().Add(sandboxTimeout))
	out, err := io.ReadAll(pr)
	if msg := strings.TrimSpace(string(out)); err != nil || msg != "ok" {
		if err == nil {
			err = errors.New(msg)
		}
		return fmt.Errorf("pause did not start: %w", err)
	}
	start, err := procStartTime(pid)
	if err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(p.dir, sandboxFile), sandboxRecord{Pid: pid, StartTime: start}); err != nil {
		return err
	}
	m, err := sandboxCgroup(cgroupPath(p.rec.CgroupParent, p.id, sandboxName))
	if err != nil {
		return fmt.Errorf("sandbox cgroup: %w", err)
	}
	if err := m.Apply(pid); err != nil {
		return fmt.Errorf("sandbox cgroup: %w", err)
	}
	return nil
}

// sandboxSubsystems are the cgroup v1 hierarchies a sandbox joins: those
// that account for what it uses, so that its pod is charged. In the others
// (devices, freezer, blkio, cpuset...) it stays where the runtime's
// process is: the pause process does nothing they govern, and each
// hierarchy costs a directory made and removed per pod.
var sandboxSubsystems = []string{"memory", "cpu", "cpuacct", "pids"}

// sandboxMounts are the mount points of sandboxSubsystems on a cgroup v1
// host, by subsystem (nil on cgroup v2).
var sandboxMounts = sync.OnceValue(func() map[string]string {
	if cgroups.IsCgroup2UnifiedMode() {
		return nil
	}
	m := make(map[string]string)
	for _, s := range sandboxSubsystems {
		if mnt, err := cgroups.FindCgroupMountpoint("", s); err == nil {
			m[s] = mnt
		}
	}
	return m
})

// sandboxCgroup is the manager of the sandbox cgroup at path: in every
// hierarchy on cgroup v2, in sandboxSubsystems' on v1.
func sandboxCgroup(path string) (cgroups.Manager, error) {
	cg := &cgroups.Cgroup{Path: path, Resources: &cgroups.Resources{SkipDevices: true}}
	mounts := sandboxMounts()
	if mounts == nil {
		return manager.New(cg)
	}
	paths := make(map[string]string, len(mounts))
	for s, mnt := range mounts {
		paths[s] = filepath.Join(mnt, path)
	}
	return manager.NewWithPaths(cg, paths)
}

// limitPod sets the limits of a capbox's placeholder on its pod cgroup
// (PARENT/ID), which the pods started inside the capbox are children of:
// together they hold no more than the capbox.
func limitPod(p *pod) error {
	r := p.rec.Spec.Containers[0].Resources
	// Devices stay as they are: each container sets its own rules.
	res := &cgroups.Resources{SkipDevices: true}
	limitCPUMemory(res, r)
	m, err := manager.New(&cgroups.Cgroup{Path: cgroupPath(p.rec.CgroupParent, p.id, ""), Resources: res})
	if err != nil {
		return fmt.Errorf("capbox cgroup: %w", err)
	}
	if err := m.Apply(-1); err != nil {
		return fmt.Errorf("capbox cgroup: %w", err)
	}
	if err := m.Set(res); err != nil {
		return fmt.Errorf("capbox cgroup limits: %w", err)
	}
	return nil
}

// cleanup removes what a pod left on the host after its processes ended:
// its containers' libcontainer state and cgroups, its attachment to the
// pod network, its pod cgroup in every hierarchy, and its state directory
// with the logs. rec is the pod's record, or nil to read it from the
// state directory (where a pod that cannot be adopted may lack it).
func (r *Runtime) cleanup(id string, rec *record) error {
	dir := r.podDir(id)
	var errs []error
	if rec == nil {
		rec = &record{}
		if err := readJSON(filepath.Join(dir, recordFile), rec); err != nil {
			*rec = record{} // nothing of the pod is known
		}
	}
	// Containers that still have libcontainer state.
	if ents, err := os.ReadDir(filepath.Join(dir, lcDir)); err == nil {
		for _, e := range ents {
			if lc, err := loadContainer(filepath.Join(dir, lcDir), e.Name()); err == nil {
				_ = lc.Signal(unix.SIGKILL)
				if err := lc.Destroy(); err != nil {
					errs = append(errs, fmt.Errorf("destroy container %s: %w", e.Name(), err))
				}
			}
		}
	}
	// A sandbox still running (cleanup of a half-started pod).
	var sb sandboxRecord
	if err := readJSON(filepath.Join(dir, sandboxFile), &sb); err == nil {
		if w := adoptPid(sb.Pid, sb.StartTime); w != nil {
			_ = w.signal(unix.SIGKILL)
			_ = w.wait()
			shim.Reap(sb.Pid)
			w.close()
		}
	}
	if attached(&rec.Spec) && r.net != nil {
		// After the sandbox: the pod's namespace stays pinned, and its
		// veth in it, until the plugins have let go of both.
		if err := r.detach(id, rec.Spec.Ports); err != nil {
			errs = append(errs, err)
		}
	}
	if parent := rec.CgroupParent; parent != "" {
		m, err := manager.New(&cgroups.Cgroup{Path: cgroupPath(parent, id, ""), Resources: &cgroups.Resources{}})
		if err == nil {
			err = m.Destroy()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
		}
	}
	if err := unmountOverlays(dir); err != nil {
		errs = append(errs, err)
		return errors.Join(errs...) // never remove through a mount
	}
	if err := r.unmountVolumes(id, dir); err != nil {
		errs = append(errs, err)
		return errors.Join(errs...)
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// adoptPid returns a watch on pid if it is still the process that started
// at start, else nil.
func adoptPid(pid int, start uint64) *pidWatch {
	if st, err := procStartTime(pid); err != nil || st != start {
		return nil
	}
	w, err := watchPid(pid)
	if err != nil {
		return nil
	}
	// The PID may have been reused between the check and the open.
	if st, err := procStartTime(pid); err != nil || st != start {
		w.close()
		return nil
	}
	return w
}
