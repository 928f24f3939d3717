package container

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/nodelet/runtime/container/shim"
)

// shimClient runs a serving sluice-shim (cmd/sluice-shim) and has it
// create containers. The shim is a small binary: each container's init
// re-executes the binary that created it, and booting the shim costs a
// fraction of booting the whole sluice binary with every package's init.
// The shim is the parent of the inits it starts and reports their exits;
// if it dies, they are left to this process (a subreaper), which then
// reaps them itself.
type shimClient struct {
	cmd  *exec.Cmd
	conn *net.UnixConn
	done chan struct{} // closed when the shim's socket has closed
	mu   struct {
		sync.Mutex
		seq     uint64
		gone    bool // the socket has closed: no call will be answered
		calls   map[uint64]chan shim.Message
		exits   map[int]int           // exit codes not yet collected, by pid
		waiters map[int]chan struct{} // closed when exits has the pid
	}
}

// startShim starts bin serving on a socket pair and makes this process a
// subreaper.
func startShim(bin string) (*shimClient, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become subreaper for the shim's containers: %w", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shim socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "shim"), os.NewFile(uintptr(fds[1]), "shim")
	defer theirs.Close()
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		theirs.Close()
		return nil, fmt.Errorf("shim socket: %w", err)
	}
	cmd := exec.Command(bin, shim.ServeArg)
	cmd.ExtraFiles = []*os.File{theirs} // shim.ConnFd
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		c.Close()
		return nil, fmt.Errorf("start shim: %w", err)
	}
	s := &shimClient{cmd: cmd, conn: c.(*net.UnixConn), done: make(chan struct{})}
	s.mu.calls = make(map[uint64]chan shim.Message)
	s.mu.exits = make(map[int]int)
	s.mu.waiters = make(map[int]chan struct{})
	go s.read()
	return s, nil
}

// read dispatches the shim's messages until its socket closes.
func (s *shimClient) read() {
	defer close(s.done)
	buf := make([]byte, shim.MaxMessage)
	for {
		n, err := s.conn.Read(buf)
		if err != nil || n == 0 {
			break
		}
		var m shim.Message
		if json.Unmarshal(buf[:n], &m) != nil {
			continue
		}
		s.mu.Lock()
		if m.Exited {
			s.mu.exits[m.Pid] = m.Code
			if w := s.mu.waiters[m.Pid]; w != nil {
				close(w)
				delete(s.mu.waiters, m.Pid)
			}
		} else if ch := s.mu.calls[m.Seq]; ch != nil {
			ch <- m
			delete(s.mu.calls, m.Seq)
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.mu.gone = true
	for seq, ch := range s.mu.calls {
		close(ch)
		delete(s.mu.calls, seq)
	}
	s.mu.Unlock()
}

var errShimGone = errors.New("shim is gone")

// create has the shim create and start the container of req, with logf as
// its stdout and stderr, and returns its init's pid.
func (s *shimClient) create(req *shim.Request, logf *os.File) (int, error) {
	ch := make(chan shim.Message, 1)
	s.mu.Lock()
	s.mu.seq++
	req.Seq = s.mu.seq
	s.mu.Unlock()
	b, err := json.Marshal(req)
	if err != nil {
		return 0, fmt.Errorf("shim request: %w", err)
	}
	if len(b) > shim.MaxMessage {
		return 0, fmt.Errorf("shim request of %d bytes is over the limit of %d", len(b), shim.MaxMessage)
	}
	s.mu.Lock()
	if s.mu.gone {
		s.mu.Unlock()
		return 0, errShimGone
	}
	s.mu.calls[req.Seq] = ch
	s.mu.Unlock()
	if _, _, err := s.conn.WriteMsgUnix(b, unix.UnixRights(int(logf.Fd())), nil); err != nil {
		s.mu.Lock()
		delete(s.mu.calls, req.Seq)
		s.mu.Unlock()
		return 0, fmt.Errorf("shim request: %w", err)
	}
	m, ok := <-ch
	if !ok {
		return 0, errShimGone
	}
	if m.Error != "" {
		return 0, errors.New(m.Error)
	}
	return m.Pid, nil
}

// reap returns the exit of pid, an init the shim started, once pid has
// ended: as the shim reported it, or, if the shim is gone, as this
// process (the subreaper it was left to) reaps it.
func (s *shimClient) reap(pid int) (code int, known bool) {
	s.mu.Lock()
	w, ok := s.mu.waiters[pid]
	if _, ended := s.mu.exits[pid]; !ended && !ok {
		w = make(chan struct{})
		s.mu.waiters[pid] = w
	}
	s.mu.Unlock()
	if w != nil {
		select {
		case <-w:
		case <-s.done:
		}
	}
	s.mu.Lock()
	code, ended := s.mu.exits[pid]
	delete(s.mu.exits, pid)
	delete(s.mu.waiters, pid)
	s.mu.Unlock()
	if !ended {
		return shim.Reap(pid)
	}
	return code, code >= 0
}

// alive reports whether the shim's socket is open.
func (s *shimClient) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// close stops the shim: it exits when its socket closes. The inits it
// started are left to this process.
func (s *shimClient) close() error {
	s.conn.Close()
	<-s.done
	return s.cmd.Wait()
}
