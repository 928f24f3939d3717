package api

import (
	"errors"
	"net"
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
