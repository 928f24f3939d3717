package chaosbench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ProxyMode is what a Proxy does with the bytes it carries.
type ProxyMode int

const (
	// Pass forwards every byte as it comes.
	Pass ProxyMode = iota
	// Drop closes every open connection and accepts new ones without
	// forwarding anything, as a network that loses every packet: the
	// dialler's connection opens and its writes vanish.
	Drop
	// Delay forwards every chunk of bytes after the proxy's delay.
	Delay
)

func (m ProxyMode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Drop:
		return "drop"
	case Delay:
		return "delay"
	}
	return fmt.Sprintf("ProxyMode(%d)", int(m))
}

// Proxy is a TCP proxy on a loopback port that forwards every connection
// to one target, in the mode set last. Its goroutines are its own: Close
// stops them all and waits for them.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	mode   ProxyMode
	delay  time.Duration
	conns  map[net.Conn]struct{} // both sides of every open connection
	closed bool
}

// NewProxy listens on a free port of target's host and forwards to
// target.
func NewProxy(target string) (*Proxy, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("chaosbench: proxy to %s: %w", target, err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("chaosbench: proxy to %s: %w", target, err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set changes the mode; delay is used by Delay. Entering Drop closes every
// open connection, so that nothing sent before reaches the target after.
func (p *Proxy) Set(mode ProxyMode, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.delay = mode, delay
	if mode == Drop {
		for c := range p.conns {
			_ = c.Close()
		}
	}
}

func (p *Proxy) state() (ProxyMode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay
}

// track adds c to the open connections, or reports false (and closes c)
// once the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			return
		}
		p.wg.Go(func() { p.serve(in) })
	}
}

// serve carries one connection. In Drop it reads and discards what comes
// until the connection closes; else it dials the target and copies both
// ways until either side closes or the mode turns to Drop.
func (p *Proxy) serve(in net.Conn) {
	defer p.untrack(in)
	if mode, _ := p.state(); mode == Drop {
		_, _ = io.Copy(io.Discard, in)
		return
	}
	out, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		return
	}
	if !p.track(out) {
		return
	}
	defer p.untrack(out)
	var wg sync.WaitGroup
	wg.Go(func() { p.copy(out, in) })
	wg.Go(func() { p.copy(in, out) })
	wg.Wait()
}

// copy forwards from src to dst in the current mode, and closes both when
// either fails, so that the other direction ends too.
func (p *Proxy) copy(dst, src net.Conn) {
	defer func() {
		_ = src.Close()
		_ = dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			mode, delay := p.state()
			switch mode {
			case Drop:
				return
			case Delay:
				time.Sleep(delay)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
