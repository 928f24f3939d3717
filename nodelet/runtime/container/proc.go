package container

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

func itoa(i int) string { return strconv.Itoa(i) }

// pidWatch is a pidfd: a handle on one process that survives PID reuse.
// Waiting uses the Go netpoller, so a watched process costs no thread.
// Closing the file ends every wait and makes later signals fail.
type pidWatch struct {
	pid int
	f   *os.File
}

// watchPid opens a pidfd for pid.
func watchPid(pid int) (*pidWatch, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return &pidWatch{pid: pid, f: os.NewFile(uintptr(fd), "pidfd:"+itoa(pid))}, nil
}

// wait blocks until the process has exited, or returns an error once w is
// closed.
func (w *pidWatch) wait() error {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Read(func(fd uintptr) bool {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
		return n > 0 || err != nil && !errors.Is(err, unix.EINTR)
	})
}

// exited reports whether the process has exited, without blocking.
func (w *pidWatch) exited() bool {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return true
	}
	var done bool
	_ = rc.Control(func(fd uintptr) {
		n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
		done = n > 0
	})
	return done
}

// signal sends sig to the process; it fails once w is closed.
func (w *pidWatch) signal(sig unix.Signal) error {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.PidfdSendSignal(int(fd), sig, nil, 0) }); err != nil {
		return err
	}
	if errors.Is(serr, unix.ESRCH) {
		return nil // already gone
	}
	return serr
}

func (w *pidWatch) close() { _ = w.f.Close() }

// reap collects the exit status of pid, which must have exited, if it is
// a child of this process. known is false when it is not (a process
// adopted from an earlier nodelet).
func reap(pid int) (code int, known bool) {
	var ws unix.WaitStatus
	for {
		got, err := unix.Wait4(pid, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || got != pid {
			return -1, false
		}
		break
	}
	switch {
	case ws.Exited():
		return ws.ExitStatus(), true
	case ws.Signaled():
		return 128 + int(ws.Signal()), true
	}
	return -1, false
}

// procStartTime is the start time of pid in clock ticks since boot (field
// 22 of /proc/PID/stat), which with the PID identifies a process.
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return strconv.ParseUint(string(fields[19]), 10, 64)
}
