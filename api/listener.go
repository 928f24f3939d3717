package api

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// KeepAccepting wraps ln, the listener of a server of this API (the
// dispatcher's, a nodelet's log server), so that its Accept rides out
// errors that pass: out of file descriptors or memory, a connection reset
// before it was accepted. It waits (5 ms, doubling to 1 s, as net/http
// does) and accepts again, calling onError, if not nil, with each error
// and the wait. Only a closed listener's error (net.ErrClosed) is
// returned, which is how a server shuts down.
//
// fasthttp's Server.Serve returns on any accept error but a timeout, and a
// server whose Serve has returned still holds its listening socket: clients
// connect, the kernel queues them, and they wait for answers that never
// come, while the process looks healthy.
func KeepAccepting(ln net.Listener, onError func(err error, retryIn time.Duration)) net.Listener {
	return &keepAccepting{Listener: ln, onError: onError}
}

type keepAccepting struct {
	net.Listener
	onError func(error, time.Duration)
}

func (l *keepAccepting) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil || errors.Is(err, net.ErrClosed) {
			return c, err
		}
		delay = min(max(2*delay, 5*time.Millisecond), time.Second)
		if l.onError != nil {
			l.onError(err, delay)
		}
		time.Sleep(delay)
	}
}

// ConnLimit bounds the connections that the listeners it wraps (Listener)
// hold open together, so that a server keeps file descriptors for what it
// cannot do without: a dispatcher's store opens files as it compacts, and
// its raft peers connect, while thousands of nodes reconnect after an
// election. While the limit is reached, Accept waits, and the connections
// wait in the kernel's listen queue (a client sees a slower answer, not
// an error); the first Close of an accepted connection frees its place.
// Several listeners share one limit when they share a process's
// descriptors, as replicas in one process do. Safe for concurrent use.
type ConnLimit struct {
	slots chan struct{}
}

// NewConnLimit returns a limit of n connections open at once; n < 1 is
// taken as 1.
func NewConnLimit(n int) *ConnLimit {
	return &ConnLimit{slots: make(chan struct{}, max(n, 1))}
}

// Max is the limit: how many connections may be open at once.
func (l *ConnLimit) Max() int { return cap(l.slots) }

// Open is how many connections of the limit's listeners are open.
func (l *ConnLimit) Open() int { return len(l.slots) }

// Listener wraps ln so that its connections count against l. Its Accept
// takes a place before it accepts, waiting for one while the limit is
// reached, and returns net.ErrClosed once the listener is closed, waiting
// or not.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, limit: l, closed: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	limit     *ConnLimit
	closeOnce sync.Once
	closed    chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.limit.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.limit.slots
		return nil, err
	}
	return &limitConn{Conn: c, limit: l.limit}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitConn is an accepted connection holding a place of its limit.
type limitConn struct {
	net.Conn
	limit    *ConnLimit
	released atomic.Bool
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	if c.released.CompareAndSwap(false, true) {
		<-c.limit.slots
	}
	return err
}
