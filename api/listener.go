package api

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
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
// election. When a connection comes with the limit reached, Accept closes
// the connection that has been idle longest (kept alive between requests,
// as a server told of its states by ConnState knows) to make room, or,
// with none idle, waits for one to close or go idle; meanwhile newer
// connections wait in the kernel's listen queue (a client sees a slower
// answer, not an error).
// The first Close of an accepted connection frees its place. Several
// listeners share one limit when they share a process's descriptors, as
// replicas in one process do. Safe for concurrent use.
type ConnLimit struct {
	slots chan struct{}
	// wake tells a waiting Accept that a connection went idle.
	wake chan struct{}
	shed atomic.Uint64
	mu   struct {
		sync.Mutex
		// idle are the idle connections, longest idle first.
		idle idleList
	}
}

// NewConnLimit returns a limit of n connections open at once; n < 1 is
// taken as 1.
func NewConnLimit(n int) *ConnLimit {
	return &ConnLimit{slots: make(chan struct{}, max(n, 1)), wake: make(chan struct{}, 1)}
}

// Max is the limit: how many connections may be open at once.
func (l *ConnLimit) Max() int { return cap(l.slots) }

// Open is how many connections of the limit's listeners are open.
func (l *ConnLimit) Open() int { return len(l.slots) }

// Idle is how many of the open connections are idle (see ConnState). It
// walks the idle list: for tests and occasional reads, not a hot path.
func (l *ConnLimit) Idle() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for c := l.mu.idle.head; c != nil; c = c.next {
		n++
	}
	return n
}

// Shed is how many idle connections Accept has closed to make room.
func (l *ConnLimit) Shed() uint64 { return l.shed.Load() }

// ConnState is a fasthttp.Server's ConnState hook: it tells the limit
// which of its connections are idle, and so may be closed to make room.
// Connections of other listeners are ignored; a TLS connection counts as
// the one beneath it.
func (l *ConnLimit) ConnState(c net.Conn, st fasthttp.ConnState) {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = t.NetConn()
	}
	lc, ok := c.(*limitConn)
	if !ok || lc.limit != l {
		return
	}
	l.mu.Lock()
	l.mu.idle.remove(lc)
	idle := st == fasthttp.StateIdle && !lc.released.Load()
	if idle {
		l.mu.idle.pushBack(lc)
	}
	l.mu.Unlock()
	if idle {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// acquire takes a place for a connection, making room by closing the
// longest idle connection when there is none; it returns false when
// closed is closed first.
func (l *ConnLimit) acquire(closed <-chan struct{}) bool {
	for {
		select {
		case l.slots <- struct{}{}:
			return true
		default:
		}
		l.shedIdle()
		select {
		case l.slots <- struct{}{}:
			return true
		case <-l.wake:
		case <-closed:
			return false
		}
	}
}

// shedIdle closes the connection idle longest, if any.
func (l *ConnLimit) shedIdle() {
	l.mu.Lock()
	c := l.mu.idle.head
	l.mu.idle.remove(c)
	l.mu.Unlock()
	if c != nil {
		l.shed.Add(1)
		_ = c.Close()
	}
}

// Listener wraps ln so that its connections count against l. Its Accept
// takes a place for each connection it accepts before returning it (see
// ConnLimit), so that a listener holds one connection more than its
// places while it waits; and returns net.ErrClosed once the listener is
// closed, waiting or not.
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
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if !l.limit.acquire(l.closed) {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	return &limitConn{Conn: c, limit: l.limit}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitConn is an accepted connection holding a place of its limit. prev
// and next link it into the limit's idle list, under the limit's mutex.
type limitConn struct {
	net.Conn
	limit      *ConnLimit
	released   atomic.Bool
	prev, next *limitConn
	listed     bool
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	if c.released.CompareAndSwap(false, true) {
		c.limit.mu.Lock()
		c.limit.mu.idle.remove(c)
		c.limit.mu.Unlock()
		<-c.limit.slots
	}
	return err
}

// idleList is a doubly linked list of connections, oldest first.
type idleList struct{ head, tail *limitConn }

func (q *idleList) pushBack(c *limitConn) {
	c.prev, c.next, c.listed = q.tail, nil, true
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
}

// remove takes c out of the list; a nil c or one not listed is ignored.
func (q *idleList) remove(c *limitConn) {
	if c == nil || !c.listed {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.tail = c.prev
	}
	c.prev, c.next, c.listed = nil, nil, false
}
