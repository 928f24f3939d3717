package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/sluicehq/sluice/nodelet/runtime/container/cni"
)

// defaultDevPodCIDR is the default of `sluice dev --pod-cidr`: node i of
// the default pool gets its i-th /24.
var defaultDevPodCIDR = netip.MustParsePrefix("10.214.0.0/16")

// devPodNetwork is the pod subnet and bridge of the n-th (from 0)
// container node of `sluice dev`: the n-th /24 of cidr (a /16 to /23),
// and a bridge named after this process and n, so that two clusters on
// one host never take each other's bridge.
func devPodNetwork(cidr netip.Prefix, n int) (netip.Prefix, string, error) {
	if err := cni.CheckPodCIDR(cidr); err != nil {
		return netip.Prefix{}, "", err
	}
	if cidr.Bits() > 23 || n >= 1<<(24-cidr.Bits()) {
		return netip.Prefix{}, "", fmt.Errorf("--pod-cidr %s: want a /16 to /23, with a /24 for each of the nodes", cidr)
	}
	a := cidr.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 + uint32(n)<<8
	sub := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), 0}), 24)
	return sub, fmt.Sprintf("sdev%d-%d", os.Getpid()%10000000, n), nil
}

// apiForwarder makes the dev dispatcher's API, which listens on loopback,
// reachable from a container node's bridge-mode pods: it listens on the
// node's pod gateway at the API's port (so that a pod's SLUICE_ADDR, the
// API's URL with the gateway for loopback, reaches it) and copies each
// connection to the API. The API is not exposed beyond the host: only the
// node's pods reach the gateway.
type apiForwarder struct {
	ln     net.Listener
	target string
	logger *slog.Logger
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{} // open ones, closed by close
	closed bool
}

// forwardAPI starts an apiForwarder from gateway to the API at apiURL.
func forwardAPI(gateway netip.Addr, apiURL string, logger *slog.Logger) (*apiForwarder, error) {
	u, err := url.Parse(apiURL)
	if err != nil || u.Port() == "" {
		return nil, fmt.Errorf("forward the API to the pods: bad API address %q", apiURL)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(gateway.String(), u.Port()))
	if err != nil {
		return nil, fmt.Errorf("forward the API to the pods: %w", err)
	}
	f := &apiForwarder{ln: ln, target: u.Host, logger: logger, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *apiForwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				f.logger.Warn("dev: API forwarder stopped", "err", err)
			}
			return
		}
		if !f.track(c) {
			c.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.untrack(c)
			d := net.Dialer{Timeout: 5 * time.Second}
			up, err := d.DialContext(context.Background(), "tcp", f.target)
			if err != nil {
				f.logger.Warn("dev: API forwarder: dial the API", "err", err)
				return
			}
			if !f.track(up) {
				up.Close()
				return
			}
			defer f.untrack(up)
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(up, c)
				if tc, ok := up.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				close(done)
			}()
			_, _ = io.Copy(c, up)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			<-done
		}()
	}
}

// track records an open connection; false once closed.
func (f *apiForwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *apiForwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
}

// close stops listening, closes every connection and waits for the
// goroutines.
func (f *apiForwarder) close() error {
	err := f.ln.Close()
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	return err
}
