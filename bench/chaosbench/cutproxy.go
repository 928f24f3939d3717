package chaosbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// cutProxy carries one real nodelet's HTTP traffic to one replica. Each
// nodelet has one per replica and is given only their addresses, and a
// proxy rewrites a follower's redirect to the leader (Location: the
// leader's own base URL, from the replicas' --peer-http) into the
// address of the same nodelet's proxy for that leader: the nodelet never
// learns a replica's own address, so cutting its proxies cuts it off from
// every replica and nothing else (the client, the fleets and the other
// nodelet keep their routes).
//
// Cut, a proxy closes every connection it holds and each new one as it
// is accepted, without a reply: to the nodelet the dispatchers are gone
// from the network.
type cutProxy struct {
	ln     net.Listener
	srv    *http.Server
	target *url.URL
	// rewrite maps a replica's base URL to this nodelet's proxy for it;
	// set once by setRewrite before traffic flows.
	rewrite map[string]string

	mu       sync.Mutex
	cut      bool
	conns    map[net.Conn]struct{}
	inflight context.Context // cancelled by a cut: ends requests in flight
	cancel   context.CancelFunc
}

// newCutProxy listens on host's loopback address and forwards to the
// replica at target (a base URL).
func newCutProxy(host, target string) (*cutProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("chaosbench: cut proxy target %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("chaosbench: cut proxy: %w", err)
	}
	p := &cutProxy{ln: ln, target: u, conns: map[net.Conn]struct{}{}}
	p.inflight, p.cancel = context.WithCancel(context.Background())
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = u.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			if loc := resp.Header.Get("Location"); loc != "" {
				resp.Header.Set("Location", p.rewriteLocation(loc))
			}
			return nil
		},
		// A cut ends the request: the nodelet sees its connection drop.
		ErrorHandler:  func(w http.ResponseWriter, _ *http.Request, _ error) { abort(w) },
		FlushInterval: -1,
	}
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.mu.Lock()
			cut, ctx := p.cut, p.inflight
			p.mu.Unlock()
			if cut {
				abort(w)
				return
			}
			rctx, stop := context.WithCancel(r.Context())
			defer stop()
			go func() {
				select {
				case <-ctx.Done():
					stop()
				case <-rctx.Done():
				}
			}()
			rp.ServeHTTP(w, r.WithContext(rctx))
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(c net.Conn, s http.ConnState) {
			p.mu.Lock()
			defer p.mu.Unlock()
			switch s {
			case http.StateNew:
				if p.cut {
					c.Close()
					return
				}
				p.conns[c] = struct{}{}
			case http.StateClosed, http.StateHijacked:
				delete(p.conns, c)
			}
		},
	}
	go func() { _ = p.srv.Serve(ln) }() // ends when Close closes the server
	return p, nil
}

// abort closes the request's connection without a reply.
func abort(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	// Not an HTTP/1 connection (never the case here): a bare failure.
	w.WriteHeader(http.StatusBadGateway)
}

// base is the proxy's base URL.
func (p *cutProxy) base() string { return "http://" + p.ln.Addr().String() }

// setRewrite sets the replicas' base URLs a Location is rewritten from,
// each to this nodelet's proxy for it. Call before any traffic.
func (p *cutProxy) setRewrite(m map[string]string) { p.rewrite = m }

func (p *cutProxy) rewriteLocation(loc string) string {
	for from, to := range p.rewrite {
		if loc == from || strings.HasPrefix(loc, from+"/") || strings.HasPrefix(loc, from+"?") {
			return to + loc[len(from):]
		}
	}
	return loc
}

// setCut cuts (true) or heals (false) the proxy.
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cut == p.cut {
		return
	}
	p.cut = cut
	if cut {
		p.cancel()
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
		return
	}
	p.inflight, p.cancel = context.WithCancel(context.Background())
}

// Close stops the proxy and ends its connections.
func (p *cutProxy) Close() error {
	p.mu.Lock()
	p.cancel()
	p.mu.Unlock()
	err := p.srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
