package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"

	// devices applies the containers' device rules on cgroup v1 and v2.
	_ "github.com/opencontainers/cgroups/devices"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	// nsenter joins namespaces (cgo) before the Go runtime starts in the
	// re-executed "init".
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
	"golang.org/x/sys/unix"
)

// Request asks the shim to create a container under Root and start it up
// to its exec. It travels with one descriptor: the file the container's
// stdout and stderr go to.
type Request struct {
	Seq    uint64
	Root   string
	ID     string
	Config *configs.Config
	Args   []string
	Env    []string
	Cwd    string
	UID    int
	GID    int
}

// Message is what the shim sends: the reply to request Seq (Pid of the
// container's init, or Error), or, with Exited, the exit of a container
// it started (Pid and Code; Code is -1 when the status is not an exit or
// a signal).
type Message struct {
	Seq    uint64 `json:",omitempty"`
	Pid    int    `json:",omitempty"`
	Error  string `json:",omitempty"`
	Exited bool   `json:",omitempty"`
	Code   int    `json:",omitempty"`
}

// MaxMessage bounds one message on the socket either way.
const MaxMessage = 1 << 20

// ConnFd is the descriptor of the socket a serving shim is given.
const ConnFd = 3

// ServeArg is the argument that makes the shim binary serve.
const ServeArg = "serve"

// Main is the whole shim binary: libcontainer's "init" when re-executed
// as one, or, with ServeArg, the server for the runtime on descriptor
// ConnFd until the runtime closes it.
func Main() {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		libcontainer.Init() // does not return
	}
	if len(os.Args) != 2 || os.Args[1] != ServeArg {
		fmt.Fprintf(os.Stderr, "sluice-shim: run by the nodelet's container runtime as \"sluice-shim %s\" (got %q)\n", ServeArg, os.Args[1:])
		os.Exit(2)
	}
	f := os.NewFile(ConnFd, "conn")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice-shim:", err)
		os.Exit(1)
	}
	conn, ok := c.(*net.UnixConn)
	if !ok {
		fmt.Fprintln(os.Stderr, "sluice-shim: descriptor 3 is not a unix socket")
		os.Exit(1)
	}
	if err := serve(conn); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-shim:", err)
		os.Exit(1)
	}
}

// server is a serving shim: it creates containers on request and reaps
// their init processes, which are its children.
type server struct {
	conn *net.UnixConn
	wmu  sync.Mutex // serializes writes to conn
}

// serve answers requests on conn until it is closed, then returns nil.
// The goroutines it starts end with the process.
func serve(conn *net.UnixConn) error {
	// The shim lives as long as the nodelet and holds little: a small
	// heap goal keeps its resident set small.
	debug.SetGCPercent(25)
	// The shim lives until the runtime closes its socket, not until a
	// terminal's interrupt or hangup reaches its process group. Caught,
	// not ignored: an ignored signal would stay ignored in the containers.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGINT, unix.SIGHUP)
	go func() {
		for range sigs {
		}
	}()
	s := &server{conn: conn}
	buf := make([]byte, MaxMessage)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return nil // the runtime is gone
		}
		var req Request
		logf, ferr := receivedFile(oob[:oobn])
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			if logf != nil {
				logf.Close()
			}
			return fmt.Errorf("read request: %w", err)
		}
		if ferr != nil {
			s.send(Message{Seq: req.Seq, Error: ferr.Error()})
			continue
		}
		go s.create(&req, logf)
	}
}

func receivedFile(oob []byte) (*os.File, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		return nil, errors.New("request came without its log file")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, errors.New("request came without its log file")
	}
	return os.NewFile(uintptr(fds[0]), "log"), nil
}

func (s *server) create(req *Request, logf *os.File) {
	defer logf.Close() // the container holds its own descriptor
	_, pid, err := Start(req, logf)
	if err != nil {
		s.send(Message{Seq: req.Seq, Error: err.Error()})
		return
	}
	// A pidfd before the reply: the init is our child, so its pid stays
	// its own until reaped here.
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		Reap(pid)
		s.send(Message{Seq: req.Seq, Error: fmt.Sprintf("watch init %d: %v", pid, err)})
		return
	}
	s.send(Message{Seq: req.Seq, Pid: pid})
	// A goroutine of its own waits, so that the stack libcontainer grew
	// is not held for the container's life.
	go s.watch(pid, os.NewFile(uintptr(fd), "pidfd"))
}

// watch waits for pid, an init started here, to exit, and reports it.
func (s *server) watch(pid int, pidfd *os.File) {
	_ = AwaitExit(pidfd) // fails only if pidfd is closed, which it is not
	pidfd.Close()
	code, _ := Reap(pid) // -1 when unknown
	s.send(Message{Pid: pid, Exited: true, Code: code})
}

func (s *server) send(m Message) {
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, _ = s.conn.Write(b) // a runtime that is gone reads nothing
}
