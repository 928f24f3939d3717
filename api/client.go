package api

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/valyala/fasthttp"
)

// Defaults of ClientConfig.
const (
	DefaultClientTimeout = 30 * time.Second
	DefaultClientRounds  = 7
	DefaultBackoffMin    = 100 * time.Millisecond
	DefaultBackoffMax    = 2 * time.Second
)

const (
	// maxRedirects bounds the 307/308 hops one request follows.
	maxRedirects = 3
	// maxErrorBody bounds how much of an error reply is read.
	maxErrorBody = 64 << 10
	// dialTimeout bounds connecting when the request leaves more time.
	dialTimeout = 10 * time.Second
)

// ErrTimeout is wrapped when no reply came within the request's timeout
// (ClientConfig.Timeout, plus the wait of a long-poll). A context's own
// deadline is reported as context.DeadlineExceeded instead.
var ErrTimeout = errors.New("api: request timed out")

// ErrOutcomeUnknown is wrapped when a request that is not safe to repeat
// (see Client) failed after a replica may have received it: the
// connection was lost or timed out once the request was sent, or the
// replica answered a 5xx other than not_leader. The client did not send it
// again, and whether it took effect is unknown: check the state, or send
// it again with an idempotency key.
var ErrOutcomeUnknown = errors.New("api: the outcome is unknown (the request may have taken effect); not sent again")

// ClientConfig configures a Client. Zero values mean the documented
// defaults.
type ClientConfig struct {
	// Addrs are the dispatcher replicas' base URLs, such as
	// "http://127.0.0.1:8080"; at least one. They are tried in order when
	// one cannot be connected to.
	Addrs []string
	// Token is the bearer token sent with every request; "" sends none.
	Token string
	// TLS configures https connections. Nil means Go's defaults.
	TLS *tls.Config
	// Timeout bounds each request: connecting, sending and receiving the
	// whole reply. A long-poll adds its wait to it. A stream (Logs, Watch)
	// is bounded by its context only, since it may rightly stay quiet for
	// long; TCP keep-alives end it when the peer is gone. Default
	// DefaultClientTimeout.
	Timeout time.Duration
	// Rounds is how many times at most a call goes over the replicas
	// while each fails in a way a later try may mend (see Client). Default
	// DefaultClientRounds; 1 tries each replica once.
	Rounds int
	// BackoffMin and BackoffMax bound the pause between two rounds: it
	// starts at BackoffMin and doubles up to BackoffMax, and each pause is
	// drawn at random between half of that and all of it, so that clients
	// that failed together do not come back together. Defaults
	// DefaultBackoffMin, and DefaultBackoffMax or BackoffMin if more.
	BackoffMin, BackoffMax time.Duration
	// JitterSeed seeds the draws of the pauses. Default 0: a seed from the
	// clock.
	JitterSeed uint64
	// Sleep pauses a call between rounds for d, or until ctx ends, when it
	// returns ctx's error. Default: a timer. Tests pass one that does not
	// wait.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Client calls the dispatcher's HTTP API. It is safe for concurrent use.
//
// Routing: a call goes first to the replica it last found leading (named
// by a redirect, or the one that answered after others failed), then to
// the others in the order of ClientConfig.Addrs. A follower's 307/308
// redirect to the leader is followed for every method, with the body sent
// again, at most a few hops, and the leader is remembered for later
// calls. A replica that fails a call is not tried first by the next.
//
// Failover: a call moves on to the next replica when the one it tried
//
//   - cannot be connected to (nothing was sent);
//   - answers 503 not_leader: it knows no leader, or it has stopped (its
//     store failed), and it did nothing;
//   - answers any other 5xx, or the connection is lost or times out after
//     the request was sent, when the request is safe to repeat (below).
//
// A replica that timed out is not tried again by the same call. When every
// replica failed so, the call pauses (exponential backoff with jitter,
// ClientConfig.BackoffMin to BackoffMax) and goes over them again, for
// ClientConfig.Rounds rounds at most, or until its context ends. Any other
// reply (2xx, 304, 4xx) ends the call.
//
// Repeating: a request is safe to repeat when sending it twice has the
// effect of sending it once. Those are every GET and DELETE (a cancel,
// release or stop done before counts 0), a node's registration,
// reports and heartbeats (the dispatcher takes them at least once), the
// start of capbox tasks (a name started before answers its task), a
// submit with SubmitOptions.IdempotencyKey or with every job's own key
// (Submit), and a capbox request every item of which has a key. Any other
// request (a submit without keys) is never sent again once a replica may
// have received it, because that could apply it twice: such a failure
// wraps ErrOutcomeUnknown (and the *APIError, if a replica answered).
// Callers that must retry such a submit resend it with an idempotency
// key: the dispatcher answers a repeated key with the jobs created the
// first time.
//
// Errors: every reply other than 2xx (and 304 for Target) is an *APIError;
// when no address could be connected to, the error is an
// *UnreachableError; otherwise a call that gave up returns the last
// error it met. A context's end is returned as its error
// (errors.Is(err, context.Canceled)).
type Client struct {
	addrs      []string // base URLs, without a trailing slash
	auth       string   // the Authorization header, or ""
	timeout    time.Duration
	rounds     int
	backoffMin time.Duration
	backoffMax time.Duration
	sleep      func(context.Context, time.Duration) error
	fast       *fasthttp.Client
	stream     *http.Client
	// anyFailed says mu.failed is not empty: a call that answered at once
	// need not take mu.
	anyFailed atomic.Bool

	mu struct {
		sync.Mutex
		// preferred is the base URL to try first: the leader a redirect
		// named, or the address that answered after others failed.
		preferred string
		// failed holds the addresses of ClientConfig.Addrs whose last
		// call failed.
		failed map[string]bool
		// jitter draws the pauses between rounds.
		jitter *rand.Rand
	}
}

// NewClient checks cfg and returns a Client for it.
func NewClient(cfg ClientConfig) (*Client, error) {
	var errs []error
	if len(cfg.Addrs) == 0 {
		errs = append(errs, errors.New("api: client: no address"))
	}
	addrs := make([]string, 0, len(cfg.Addrs))
	for _, a := range cfg.Addrs {
		u, err := url.Parse(a)
		switch {
		case !strings.HasPrefix(a, "http://") && !strings.HasPrefix(a, "https://"):
			errs = append(errs, fmt.Errorf("api: client: address %q: scheme must be http or https", a))
		case err != nil:
			errs = append(errs, fmt.Errorf("api: client: address %q: %w", a, err))
		case u.Scheme != "http" && u.Scheme != "https":
			errs = append(errs, fmt.Errorf("api: client: address %q: scheme must be http or https", a))
		case u.Host == "" || u.Hostname() == "":
			errs = append(errs, fmt.Errorf("api: client: address %q: no host", a))
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			errs = append(errs, fmt.Errorf("api: client: address %q: want scheme://host[:port][/path] only", a))
		default:
			b := strings.TrimRight(a, "/")
			if !slices.Contains(addrs, b) {
				addrs = append(addrs, b)
			}
		}
	}
	if cfg.Timeout < 0 {
		errs = append(errs, fmt.Errorf("api: client: negative timeout %v", cfg.Timeout))
	}
	if cfg.Rounds < 0 {
		errs = append(errs, fmt.Errorf("api: client: negative rounds %d", cfg.Rounds))
	}
	if cfg.BackoffMin < 0 || cfg.BackoffMax < 0 {
		errs = append(errs, fmt.Errorf("api: client: negative backoff %v to %v", cfg.BackoffMin, cfg.BackoffMax))
	}
	c := &Client{addrs: addrs, timeout: cmp.Or(cfg.Timeout, DefaultClientTimeout), rounds: cmp.Or(cfg.Rounds, DefaultClientRounds),
		backoffMin: cmp.Or(cfg.BackoffMin, DefaultBackoffMin), backoffMax: cfg.BackoffMax, sleep: cfg.Sleep}
	if c.backoffMax == 0 {
		c.backoffMax = max(DefaultBackoffMax, c.backoffMin)
	}
	if c.backoffMin > c.backoffMax {
		errs = append(errs, fmt.Errorf("api: client: BackoffMin %v exceeds BackoffMax %v", c.backoffMin, c.backoffMax))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if c.sleep == nil {
		c.sleep = sleepCtx
	}
	seed := cfg.JitterSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	c.mu.jitter = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	if cfg.Token != "" {
		c.auth = "Bearer " + cfg.Token
	}
	c.fast = &fasthttp.Client{
		Name:        "sluice-client",
		TLSConfig:   cfg.TLS,
		DialTimeout: dialFast,
		// Task IDs hold '/', sent escaped; normalizing would unescape them.
		DisablePathNormalizing: true,
		MaxIdleConnDuration:    30 * time.Second,
	}
	tr := &http.Transport{
		DialContext:         dialStream,
		TLSClientConfig:     cfg.TLS,
		TLSHandshakeTimeout: c.timeout,
		IdleConnTimeout:     30 * time.Second,
		MaxIdleConnsPerHost: 2,
	}
	c.stream = &http.Client{
		Transport: tr,
		// Redirects are followed by route, for every method, with the
		// leader remembered.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// Close closes the client's idle connections. Calls in progress finish;
// the Client may still be used, and opens new connections then.
func (c *Client) Close() {
	c.fast.CloseIdleConnections()
	c.stream.CloseIdleConnections()
}

// dialError marks a failure to connect: the request was not sent, so it
// may go to another address whatever its method.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

func dialFast(addr string, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 || timeout > dialTimeout {
		timeout = dialTimeout
	}
	d := net.Dialer{Timeout: timeout, KeepAlive: 15 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, &dialError{err}
	}
	return conn, nil
}

func dialStream(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: 15 * time.Second}
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, &dialError{err}
	}
	return conn, nil
}

// UnreachableError says that no address could be connected to, so the
// request was not sent.
type UnreachableError struct {
	// Addrs are the base URLs tried, in order (a leader a replica
	// redirected to says which replica named it); Errs their errors.
	Addrs []string
	Errs  []error
}

func (e *UnreachableError) Error() string {
	var b strings.Builder
	b.WriteString("api: cannot connect to ")
	for i, a := range e.Addrs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%v)", a, dialCause(e.Errs[i]))
	}
	return b.String()
}

// Unwrap returns the errors of every address.
func (e *UnreachableError) Unwrap() []error { return e.Errs }

// dialCause shortens a dial error to its cause: "connection refused"
// rather than "dial tcp 127.0.0.1:8080: connect: connection refused".
func dialCause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
		var se *os.SyscallError
		if errors.As(err, &se) {
			return se.Err
		}
	}
	return err
}

// IsUnreachable reports whether err says that no dispatcher address could
// be connected to.
func IsUnreachable(err error) bool {
	var ue *UnreachableError
	return errors.As(err, &ue)
}

// APIError is a reply other than 2xx: its status and the decoded body.
// A body that is not an ErrorResponse becomes its Error message, and Code
// is then derived from Status.
type APIError struct {
	Status int
	ErrorResponse
}

// Error says the status and the server's message, with its first problems.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "api: %d", e.Status)
	if t := http.StatusText(e.Status); t != "" {
		b.WriteString(" " + t)
	}
	msg := e.ErrorResponse.Error
	if msg != "" {
		b.WriteString(": " + msg)
	}
	const shown = 3
	if len(e.Problems) > 0 && !strings.Contains(msg, e.Problems[0].String()) {
		sep := ": "
		for _, p := range e.Problems[:min(len(e.Problems), shown)] {
			b.WriteString(sep + p.String())
			sep = "; "
		}
		if n := max(e.Total, len(e.Problems)) - min(len(e.Problems), shown); n > 0 {
			fmt.Fprintf(&b, "; and %d more", n)
		}
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) true for a CodeInvalid reply and
// errors.Is(err, ErrTooLarge) for a CodeTooLarge one.
func (e *APIError) Is(target error) bool {
	return target == ErrInvalid && e.Code == CodeInvalid ||
		target == ErrTooLarge && e.Code == CodeTooLarge
}

// ErrorCode returns the Code of the *APIError in err's chain, or "".
func ErrorCode(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// IsNotFound reports whether err is a not_found reply.
func IsNotFound(err error) bool { return ErrorCode(err) == CodeNotFound }

// IsConflict reports whether err is a conflict reply.
func IsConflict(err error) bool { return ErrorCode(err) == CodeConflict }

// IsUnavailable reports whether err is a reply that a later try may not
// get: unavailable, or not_leader with no leader known.
func IsUnavailable(err error) bool {
	c := ErrorCode(err)
	return c == CodeUnavailable || c == CodeNotLeader
}

// statusCodes derives an error code from a status when the body has none.
var statusCodes = map[int]string{
	http.StatusBadRequest:            CodeInvalid,
	http.StatusUnauthorized:          CodeUnauthorized,
	http.StatusForbidden:             CodeForbidden,
	http.StatusNotFound:              CodeNotFound,
	http.StatusConflict:              CodeConflict,
	http.StatusRequestEntityTooLarge: CodeTooLarge,
	http.StatusUnsupportedMediaType:  CodeUnsupportedMedia,
	http.StatusInternalServerError:   CodeInternal,
	http.StatusServiceUnavailable:    CodeUnavailable,
	http.StatusTemporaryRedirect:     CodeNotLeader,
	http.StatusPermanentRedirect:     CodeNotLeader,
}

// newAPIError decodes an error reply.
func newAPIError(status int, body []byte) *APIError {
	e := &APIError{Status: status}
	if err := json.Unmarshal(body, &e.ErrorResponse); err != nil || e.Code == "" && e.ErrorResponse.Error == "" {
		e.ErrorResponse = ErrorResponse{Error: strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))}
	}
	if e.ErrorResponse.Error == "" {
		e.ErrorResponse.Error = strings.ToLower(http.StatusText(status))
	}
	if e.Code == "" {
		e.Code = statusCodes[status]
	}
	return e
}

// request is one API call, before routing.
type request struct {
	method string
	// path is the escaped path; query the encoded query, without '?'.
	path, query string
	body        []byte
	contentType string
	encoding    string // Content-Encoding
	idemKey     string
	// wait lengthens the timeout of a long-poll.
	wait time.Duration
	// repeatable marks a request other than a GET or DELETE that is safe
	// to send again (see Client).
	repeatable bool
	// once goes over the replicas once, without pauses: a probe its
	// caller repeats.
	once bool
}

// safe reports whether r may be sent again after a replica may have
// received it: see Client.
func (r *request) safe() bool {
	return r.repeatable || r.idemKey != "" || r.method == http.MethodGet || r.method == http.MethodDelete
}

func (r *request) pathQuery() string {
	if r.query == "" {
		return r.path
	}
	return r.path + "?" + r.query
}

// reply is what an exchange returns of a reply.
type reply struct {
	status   int
	location string
	body     []byte // all of it for fasthttp; an error reply's for streams
}

// exchange makes one HTTP exchange with the full URL u.
type exchange func(ctx context.Context, u string) (reply, error)

// bases returns the base URLs in the order to try them: the preferred
// one, then the others of ClientConfig.Addrs, those whose last call
// failed last.
func (c *Client) bases() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.mu.preferred
	if p == "" && len(c.mu.failed) == 0 {
		return c.addrs
	}
	out := make([]string, 0, len(c.addrs)+1)
	if p != "" {
		out = append(out, p)
	}
	for _, a := range c.addrs {
		if a != p && !c.mu.failed[a] {
			out = append(out, a)
		}
	}
	for _, a := range c.addrs {
		if a != p && c.mu.failed[a] {
			out = append(out, a)
		}
	}
	return out
}

// answered records that base answered a call; prefer makes it the
// address tried first.
func (c *Client) answered(base string, prefer bool) {
	if !prefer && !c.anyFailed.Load() {
		return
	}
	c.mu.Lock()
	delete(c.mu.failed, base)
	c.anyFailed.Store(len(c.mu.failed) > 0)
	changed := prefer && c.mu.preferred != base
	if prefer {
		c.mu.preferred = base
	}
	c.mu.Unlock()
	if changed {
		// Requests go to base from now on: the connections to the
		// replicas that sent them here would idle for MaxIdleConnDuration,
		// holding a descriptor on each side.
		c.fast.CloseIdleConnections()
	}
}

// fail records that a call to base failed: it is tried after the others
// until it answers again.
func (c *Client) fail(base string) {
	c.mu.Lock()
	if c.mu.preferred == base {
		c.mu.preferred = ""
	}
	if slices.Contains(c.addrs, base) {
		if c.mu.failed == nil {
			c.mu.failed = map[string]bool{}
		}
		c.mu.failed[base] = true
		c.anyFailed.Store(true)
	}
	c.mu.Unlock()
}

// route sends r to the replicas in turn, following redirects, going over
// them again after a pause while each fails in a way a later try may
// mend; see Client. It returns the successful reply (2xx or 304).
func (c *Client) route(ctx context.Context, r *request, x exchange) (reply, error) {
	pq := r.pathQuery()
	safe := r.safe()
	var (
		// hung are the replicas that timed out: this call tries them no
		// more.
		hung map[string]bool
		// tried and dialErr are the addresses of the last round that could
		// not be connected to, and their errors.
		tried   []string
		dialErr []error
		// lastErr is the last error other than a failure to connect.
		lastErr error
	)
	rounds := c.rounds
	if r.once {
		rounds = 1
	}
	for round := 0; round < rounds; round++ {
		if round > 0 {
			if !slices.ContainsFunc(c.bases(), func(b string) bool { return !hung[b] }) {
				break // every replica timed out
			}
			if err := c.sleep(ctx, c.backoff(round)); err != nil {
				return reply{}, err
			}
		}
		tried, dialErr = tried[:0], dialErr[:0]
	bases:
		for i, base := range c.bases() {
			if hung[base] {
				continue
			}
			u := base + pq
			for hop := 0; ; hop++ {
				if err := ctx.Err(); err != nil {
					return reply{}, err
				}
				rep, err := x(ctx, u)
				ub := baseOf(u, pq)
				if err != nil {
					if ctxErr := ctx.Err(); ctxErr != nil {
						return reply{}, ctxErr
					}
					if errors.Is(err, context.DeadlineExceeded) {
						return reply{}, err
					}
					c.fail(ub)
					var de *dialError
					if errors.As(err, &de) {
						if hop > 0 {
							ub += " (the leader named by " + base + ")"
						}
						tried = append(tried, ub)
						dialErr = append(dialErr, err)
						continue bases
					}
					err = fmt.Errorf("api: %s %s: %w", r.method, u, err)
					if !safe {
						return reply{}, fmt.Errorf("%w: %w", err, ErrOutcomeUnknown)
					}
					if errors.Is(err, ErrTimeout) {
						if hung == nil {
							hung = map[string]bool{}
						}
						hung[base], hung[ub] = true, true
					}
					lastErr = err
					continue bases
				}
				switch {
				case rep.status == http.StatusTemporaryRedirect || rep.status == http.StatusPermanentRedirect:
					if hop == maxRedirects {
						return reply{}, fmt.Errorf("api: %s %s: more than %d redirects", r.method, base+pq, maxRedirects)
					}
					next, err := redirectURL(u, rep, pq)
					if err != nil {
						return reply{}, fmt.Errorf("api: %s %s: %w", r.method, u, err)
					}
					u = next
					continue
				case rep.status/100 == 2 || rep.status == http.StatusNotModified:
					c.answered(ub, hop > 0 || i > 0 || round > 0)
					return rep, nil
				}
				ae := newAPIError(rep.status, rep.body)
				if ae.Status < 500 {
					return reply{}, ae
				}
				c.fail(ub)
				if ae.Code != CodeNotLeader && !safe {
					return reply{}, fmt.Errorf("%w: %w", ae, ErrOutcomeUnknown)
				}
				// Not the leader, did nothing; or failing, and the request
				// is safe to repeat: another replica may serve it.
				lastErr = ae
				continue bases
			}
		}
	}
	if lastErr != nil {
		return reply{}, lastErr
	}
	return reply{}, &UnreachableError{Addrs: tried, Errs: dialErr}
}

// backoff returns the pause before round (1 or more): BackoffMin doubled
// for each round after the first, up to BackoffMax, less a random part of
// up to half of it.
func (c *Client) backoff(round int) time.Duration {
	d := c.backoffMin
	for k := 1; k < round && d < c.backoffMax; k++ {
		d *= 2
	}
	d = min(d, c.backoffMax)
	c.mu.Lock()
	j := time.Duration(c.mu.jitter.Int64N(int64(d/2) + 1))
	c.mu.Unlock()
	return d - j
}

// sleepCtx waits for d or until ctx ends; then it returns ctx's error.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// baseOf returns the base URL of u, the full URL of a request for pq.
func baseOf(u, pq string) string {
	if b, ok := strings.CutSuffix(u, pq); ok {
		return b
	}
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Scheme + "://" + p.Host
}

// redirectURL resolves a redirect's target. A Location that names only a
// base URL (no path) gets the request's path and query; without a
// Location, the ErrorResponse's Leader is used.
func redirectURL(cur string, rep reply, pq string) (string, error) {
	loc := rep.location
	if loc == "" {
		var er ErrorResponse
		if json.Unmarshal(rep.body, &er) == nil && er.Leader != "" {
			loc = strings.TrimRight(er.Leader, "/") + pq
		}
	}
	if loc == "" {
		return "", fmt.Errorf("redirect (%d) without a Location", rep.status)
	}
	base, err := url.Parse(cur)
	if err != nil {
		return "", err
	}
	ref, err := url.Parse(loc)
	if err != nil {
		return "", fmt.Errorf("redirect to %q: %w", loc, err)
	}
	next := base.ResolveReference(ref)
	if next.Scheme != "http" && next.Scheme != "https" || next.Host == "" {
		return "", fmt.Errorf("redirect to %q: not an http(s) URL", loc)
	}
	if next.Path == "" || next.Path == "/" {
		return next.Scheme + "://" + next.Host + pq, nil
	}
	return next.String(), nil
}

// do sends r with fasthttp and returns the successful reply.
func (c *Client) do(ctx context.Context, r *request) (reply, error) {
	return c.route(ctx, r, func(ctx context.Context, u string) (reply, error) {
		return c.fastExchange(ctx, r, u)
	})
}

// fastExchange is one exchange by fasthttp, bounded by the request's
// timeout and ctx. fasthttp knows no contexts: when ctx ends first, the
// exchange is abandoned to a goroutine that ends with it, by its deadline
// at the latest.
func (c *Client) fastExchange(ctx context.Context, r *request, u string) (reply, error) {
	limit := c.timeout + r.wait
	deadline := time.Now().Add(limit)
	ctxDeadline := false
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, ctxDeadline = d, true
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	req.SetRequestURI(u)
	req.Header.SetMethod(r.method)
	req.Header.Set("Accept", "application/json")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	if r.contentType != "" {
		req.Header.SetContentType(r.contentType)
	}
	if r.encoding != "" {
		req.Header.Set("Content-Encoding", r.encoding)
	}
	if r.idemKey != "" {
		req.Header.Set(HeaderIdempotencyKey, r.idemKey)
	}
	if r.body != nil {
		// SetBody copies: an abandoned exchange may outlive the caller's
		// slice.
		req.SetBody(r.body)
	}
	run := func() (reply, error) {
		defer func() {
			fasthttp.ReleaseRequest(req)
			fasthttp.ReleaseResponse(resp)
		}()
		if err := c.fast.DoDeadline(req, resp, deadline); err != nil {
			if errors.Is(err, fasthttp.ErrTimeout) {
				if ctxDeadline {
					return reply{}, context.DeadlineExceeded
				}
				return reply{}, fmt.Errorf("%w after %v", ErrTimeout, limit)
			}
			return reply{}, err
		}
		rep := reply{status: resp.StatusCode(), location: string(resp.Header.Peek("Location"))}
		body := resp.Body()
		if len(resp.Header.ContentEncoding()) > 0 {
			var err error
			if body, err = resp.BodyUncompressed(); err != nil {
				return reply{}, fmt.Errorf("decompress reply: %w", err)
			}
		}
		rep.body = bytes.Clone(body)
		return rep, nil
	}
	if ctx.Done() == nil {
		return run()
	}
	type result struct {
		rep reply
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := run()
		done <- result{rep, err}
	}()
	select {
	case res := <-done:
		return res.rep, res.err
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
}

// doJSON sends r and decodes a 200 reply's body into out, when out is not
// nil. It returns the reply's status.
func (c *Client) doJSON(ctx context.Context, r *request, out any) (int, error) {
	rep, err := c.do(ctx, r)
	if err != nil {
		return 0, err
	}
	if out != nil && rep.status != http.StatusNoContent && rep.status != http.StatusNotModified {
		if err := json.Unmarshal(rep.body, out); err != nil {
			return rep.status, fmt.Errorf("api: %s %s: decode reply: %w", r.method, r.path, err)
		}
	}
	return rep.status, nil
}

// doDecoded sends r and reads the reply's body with decode: doJSON for
// the replies decoded by hand.
func doDecoded[T any](ctx context.Context, c *Client, r *request, decode func([]byte) (T, error)) (T, error) {
	var zero T
	rep, err := c.do(ctx, r)
	if err != nil {
		return zero, err
	}
	out, err := decode(rep.body)
	if err != nil {
		return zero, fmt.Errorf("api: %s %s: decode reply: %w", r.method, r.path, err)
	}
	return out, nil
}

// openStream sends r, a GET, with net/http and returns the reply to read
// until ctx ends; the caller closes its body.
func (c *Client) openStream(ctx context.Context, r *request) (*http.Response, error) {
	var resp *http.Response
	_, err := c.route(ctx, r, func(ctx context.Context, u string) (reply, error) {
		hr, err := http.NewRequestWithContext(ctx, r.method, u, nil)
		if err != nil {
			return reply{}, err
		}
		if c.auth != "" {
			hr.Header.Set("Authorization", c.auth)
		}
		res, err := c.stream.Do(hr)
		if err != nil {
			return reply{}, err
		}
		if res.StatusCode/100 == 2 {
			resp = res
			return reply{status: res.StatusCode}, nil
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		return reply{status: res.StatusCode, location: res.Header.Get("Location"), body: body}, nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// escSeg escapes one path segment.
func escSeg(s string) string { return url.PathEscape(s) }

// SubmitOptions are a submit's options.
type SubmitOptions struct {
	// IdempotencyKey, when set, makes the request safe to send again: item
	// i gets the job key IdempotencyKey+"/i" unless it has its own. Sent as
	// HeaderIdempotencyKey.
	IdempotencyKey string
	// Encoding compresses the body: "" (none), "gzip" or "zstd".
	Encoding string
}

// Submit submits jobs as one JSON array. It is safe to repeat (see
// Client) when opts has an IdempotencyKey or every job has its own.
func (c *Client) Submit(ctx context.Context, jobs []JobSpec, opts SubmitOptions) (SubmitResponse, error) {
	body, err := json.Marshal(jobs)
	if err != nil {
		return SubmitResponse{}, fmt.Errorf("api: submit: encode: %w", err)
	}
	keyed := len(jobs) > 0
	for i := range jobs {
		keyed = keyed && jobs[i].IdempotencyKey != ""
	}
	return c.submit(ctx, body, "application/json", opts, keyed)
}

// SubmitBody submits a body as the user wrote it: one JSON object, an
// array or NDJSON. contentType "" means "application/json". It is safe to
// repeat (see Client) only with opts.IdempotencyKey: the client does not
// read the body for keys.
func (c *Client) SubmitBody(ctx context.Context, body []byte, contentType string, opts SubmitOptions) (SubmitResponse, error) {
	return c.submit(ctx, body, contentType, opts, false)
}

// submit is SubmitBody; keyed says every job of body has its own
// idempotency key.
func (c *Client) submit(ctx context.Context, body []byte, contentType string, opts SubmitOptions, keyed bool) (SubmitResponse, error) {
	r := &request{method: http.MethodPost, path: PathJobs, contentType: contentType, idemKey: opts.IdempotencyKey, repeatable: keyed}
	if r.contentType == "" {
		r.contentType = "application/json"
	}
	var err error
	if r.body, err = compress(body, opts.Encoding); err != nil {
		return SubmitResponse{}, err
	}
	r.encoding = opts.Encoding
	return doDecoded(ctx, c, r, DecodeSubmitResponse)
}

var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
})

// compress encodes body with encoding ("", "gzip" or "zstd").
func compress(body []byte, encoding string) ([]byte, error) {
	switch encoding {
	case "":
		return body, nil
	case "gzip":
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(body); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	case "zstd":
		enc, err := zstdEncoder()
		if err != nil {
			return nil, fmt.Errorf("api: zstd: %w", err)
		}
		return enc.EncodeAll(body, make([]byte, 0, len(body)/4+64)), nil
	default:
		return nil, fmt.Errorf("api: unknown encoding %q (want gzip or zstd)", encoding)
	}
}

// JobQuery selects the jobs Jobs lists. Zero fields select everything.
type JobQuery struct {
	// States keeps jobs in any of these states.
	States []JobState
	// Queue keeps the jobs of this queue.
	Queue string
	// Labels keeps jobs that have all these labels.
	Labels map[string]string
	// History is HistoryInclude, HistoryExclude or HistoryOnly: whether
	// the summaries of forgotten jobs are listed; "" is the server's
	// default, HistoryInclude.
	History string
	// After is the Next of the previous page.
	After string
	// Limit is the most jobs in the page; 0 means the server's default.
	Limit int
	// Consistent asks for a read from the leader after it confirmed its
	// leadership, rather than a replica's possibly stale state.
	Consistent bool
}

func (q JobQuery) encode() string {
	v := url.Values{}
	for _, s := range q.States {
		v.Add("state", string(s))
	}
	if q.Queue != "" {
		v.Set("queue", q.Queue)
	}
	if q.History != "" {
		v.Set("history", q.History)
	}
	keys := make([]string, 0, len(q.Labels))
	for k := range q.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v.Add("label", k+"="+q.Labels[k])
	}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Consistent {
		v.Set("consistent", "1")
	}
	return v.Encode()
}

// Jobs lists a page of jobs.
func (c *Client) Jobs(ctx context.Context, q JobQuery) (JobList, error) {
	var out JobList
	_, err := c.doJSON(ctx, &request{method: http.MethodGet, path: PathJobs, query: q.encode()}, &out)
	return out, err
}

// Job returns one job.
func (c *Client) Job(ctx context.Context, id string) (JobStatus, error) {
	var out JobStatus
	_, err := c.doJSON(ctx, &request{method: http.MethodGet, path: PathJob + escSeg(id)}, &out)
	return out, err
}

// Cancel cancels a job. Cancelling a cancelled job succeeds and counts 0.
func (c *Client) Cancel(ctx context.Context, id string) (CancelResponse, error) {
	var out CancelResponse
	_, err := c.doJSON(ctx, &request{method: http.MethodDelete, path: PathJob + escSeg(id)}, &out)
	return out, err
}

// CreateCapboxes asks for capboxes for appmaster (the ID of an appmaster
// job): one capbox set per request. See Client for retrying: give each
// request an IdempotencyKey to make a retry safe; with every request
// keyed, the client itself repeats it on another replica.
func (c *Client) CreateCapboxes(ctx context.Context, appmaster string, reqs []CapboxRequest) (CreateCapboxesResponse, error) {
	body, err := json.Marshal(reqs)
	if err != nil {
		return CreateCapboxesResponse{}, fmt.Errorf("api: create capboxes: encode: %w", err)
	}
	keyed := len(reqs) > 0
	for i := range reqs {
		keyed = keyed && reqs[i].IdempotencyKey != ""
	}
	var out CreateCapboxesResponse
	_, err = c.doJSON(ctx, &request{method: http.MethodPost, path: PathJob + escSeg(appmaster) + "/capboxes",
		body: body, contentType: "application/json", repeatable: keyed}, &out)
	return out, err
}

// Capboxes lists appmaster's capboxes.
func (c *Client) Capboxes(ctx context.Context, appmaster string) (CapboxList, error) {
	var out CapboxList
	_, err := c.doJSON(ctx, &request{method: http.MethodGet, path: PathJob + escSeg(appmaster) + "/capboxes"}, &out)
	return out, err
}

// ReleaseCapboxes releases capboxes of appmaster by ID. Releasing one
// released before succeeds and counts 0.
func (c *Client) ReleaseCapboxes(ctx context.Context, appmaster string, ids ...string) (ReleaseCapboxesResponse, error) {
	v := url.Values{"id": ids}
	var out ReleaseCapboxesResponse
	_, err := c.doJSON(ctx, &request{method: http.MethodDelete, path: PathJob + escSeg(appmaster) + "/capboxes", query: v.Encode()}, &out)
	return out, err
}

// StartCapTasks starts tasks in appmaster's running capboxes, all or
// none. Starting a name its capbox has already is answered with that
// task's ID (listed in Existing), so a retry is safe.
func (c *Client) StartCapTasks(ctx context.Context, appmaster string, specs []CapTaskSpec) (StartCapTasksResponse, error) {
	body, err := json.Marshal(specs)
	if err != nil {
		return StartCapTasksResponse{}, fmt.Errorf("api: start capbox tasks: encode: %w", err)
	}
	var out StartCapTasksResponse
	_, err = c.doJSON(ctx, &request{method: http.MethodPost, path: PathJob + escSeg(appmaster) + "/captasks",
		body: body, contentType: "application/json", repeatable: true}, &out)
	return out, err
}

// StopCapTasks stops capbox tasks of appmaster by ID.
func (c *Client) StopCapTasks(ctx context.Context, appmaster string, ids ...string) (StopCapTasksResponse, error) {
	v := url.Values{"id": ids}
	var out StopCapTasksResponse
	_, err := c.doJSON(ctx, &request{method: http.MethodDelete, path: PathJob + escSeg(appmaster) + "/captasks", query: v.Encode()}, &out)
	return out, err
}

// Tasks lists a page of a job's placed tasks: after is the previous
// page's Next, limit 0 the server's default.
func (c *Client) Tasks(ctx context.Context, jobID, after string, limit int) (TaskList, error) {
	v := url.Values{}
	if after != "" {
		v.Set("after", after)
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	// Decoded by hand: load generators follow many jobs' tasks by pages.
	return doDecoded(ctx, c, &request{method: http.MethodGet, path: PathJob + escSeg(jobID) + "/tasks", query: v.Encode()}, DecodeTaskList)
}

// Nodes lists the registered nodes.
func (c *Client) Nodes(ctx context.Context) (NodeList, error) {
	return c.NodesPage(ctx, NodeQuery{})
}

// NodesPage returns the page of nodes q selects.
func (c *Client) NodesPage(ctx context.Context, q NodeQuery) (NodeList, error) {
	v := url.Values{}
	if q.State != "" {
		v.Set("state", string(q.State))
	}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out NodeList
	_, err := c.doJSON(ctx, &request{method: http.MethodGet, path: PathNodes, query: v.Encode()}, &out)
	return out, err
}

// Node returns one node and the pods of its target.
func (c *Client) Node(ctx context.Context, name string) (NodeDetail, error) {
	var out NodeDetail
	_, err := c.doJSON(ctx, &request{method: http.MethodGet, path: PathNode + escSeg(name)}, &out)
	return out, err
}

// Cluster returns the answering replica's summary of the cluster.
func (c *Client) Cluster(ctx context.Context) (ClusterStatus, error) {
	var out ClusterStatus
	_, err := c.doJSON(ctx, &request{method: http.MethodGet, path: PathCluster}, &out)
	return out, err
}

// Whoami returns the role and scope of the client's token.
func (c *Client) Whoami(ctx context.Context) (Whoami, error) {
	var out Whoami
	_, err := c.doJSON(ctx, &request{method: http.MethodGet, path: PathWhoami}, &out)
	return out, err
}

// Queues lists the queues: those with settings, active or pending tasks.
func (c *Client) Queues(ctx context.Context) (QueueList, error) {
	var out QueueList
	_, err := c.doJSON(ctx, &request{method: http.MethodGet, path: PathQueues}, &out)
	return out, err
}

// SetQueue sets a queue's settings, replacing the ones it had (settings
// all zero clear them), and returns the queue's status. It needs an admin
// token. Setting the same settings twice is harmless, so the request is
// sent again after a failover.
func (c *Client) SetQueue(ctx context.Context, name string, s QueueSettings) (QueueStatus, error) {
	body, err := json.Marshal(s)
	if err != nil {
		return QueueStatus{}, fmt.Errorf("api: set queue: encode: %w", err)
	}
	var out QueueStatus
	_, err = c.doJSON(ctx, &request{method: http.MethodPost, path: PathQueue + escSeg(name), body: body, contentType: "application/json", repeatable: true}, &out)
	return out, err
}

// LogOptions select a task's output.
type LogOptions struct {
	// Container is the container's name; "" means the pod's first.
	Container string
	// Follow keeps streaming until the pod ends (or ctx does).
	Follow bool
	// Tail is how many of the last lines to send; 0 means all.
	Tail int
}

// Logs copies a task's output to w until it ends, or, with Follow, until
// the pod ends or ctx does (then it returns ctx's error).
func (c *Client) Logs(ctx context.Context, taskID string, opts LogOptions, w io.Writer) error {
	v := url.Values{}
	if opts.Container != "" {
		v.Set("container", opts.Container)
	}
	if opts.Follow {
		v.Set("follow", "1")
	}
	if opts.Tail > 0 {
		v.Set("tail", strconv.Itoa(opts.Tail))
	}
	r := &request{method: http.MethodGet, path: PathTasks + escSeg(taskID) + "/logs", query: v.Encode()}
	resp, err := c.openStream(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return fmt.Errorf("api: logs of %s: %w", taskID, err)
	}
	return nil
}

// Watch streams the job changes after index from (0: from the start of
// what the server keeps) and calls fn with each, in order. It returns when
// ctx ends (its error), when fn returns an error (that error), or when the
// server ends the stream (nil). To resume, call again with the last
// event's Index.
func (c *Client) Watch(ctx context.Context, from uint64, fn func(WatchEvent) error) error {
	return c.watch(ctx, from, false, fn)
}

// WatchBrief is Watch for a watcher of states and counts: the events'
// jobs come without their spec's task groups (Spec.Tasks is nil), which
// are most of an event's bytes.
func (c *Client) WatchBrief(ctx context.Context, from uint64, fn func(WatchEvent) error) error {
	return c.watch(ctx, from, true, fn)
}

func (c *Client) watch(ctx context.Context, from uint64, brief bool, fn func(WatchEvent) error) error {
	var params []string
	if from > 0 {
		params = append(params, "from="+strconv.FormatUint(from, 10))
	}
	if brief {
		params = append(params, "brief=1")
	}
	r := &request{method: http.MethodGet, path: PathWatch, query: strings.Join(params, "&")}
	resp, err := c.openStream(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var long []byte
	for {
		line, err := readLine(br, &long)
		if len(bytes.TrimSpace(line)) > 0 { // blank lines are keep-alives
			ev, derr := DecodeWatchEvent(line)
			if derr != nil {
				return fmt.Errorf("api: watch: %w", derr)
			}
			if ferr := fn(ev); ferr != nil {
				return ferr
			}
		}
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("api: watch: %w", err)
		}
	}
}

// readLine returns the next line of br, its newline included, and any error
// that ended it (io.EOF after a last line without one). A line longer than
// br's buffer is gathered in *long; the result is valid until the next
// call. A line longer than MaxBodyBytes is an error.
func readLine(br *bufio.Reader, long *[]byte) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	*long = append((*long)[:0], line...)
	for err == bufio.ErrBufferFull {
		if len(*long) > MaxBodyBytes {
			return nil, fmt.Errorf("a line of more than %d bytes", MaxBodyBytes)
		}
		line, err = br.ReadSlice('\n')
		*long = append(*long, line...)
	}
	return *long, err
}

// DrainNode drains a node (the admin role): it takes no new task, and its
// active tasks are stopped and requeued at the request's deadline, if any.
// Repeating it sets the deadline anew.
func (c *Client) DrainNode(ctx context.Context, node string, req DrainRequest) (NodeDrainResponse, error) {
	var out NodeDrainResponse
	body, err := json.Marshal(req)
	if err != nil {
		return out, fmt.Errorf("api: drain node: encode: %w", err)
	}
	_, err = c.doJSON(ctx, &request{method: http.MethodPost, path: PathNode + escSeg(node) + "/drain", body: body,
		contentType: "application/json", repeatable: true}, &out)
	return out, err
}

// UndrainNode ends a node's drain (the admin role): it takes new tasks
// again unless it is down. Undraining a node not drained changes nothing.
func (c *Client) UndrainNode(ctx context.Context, node string) (NodeDrainResponse, error) {
	var out NodeDrainResponse
	_, err := c.doJSON(ctx, &request{method: http.MethodDelete, path: PathNode + escSeg(node) + "/drain"}, &out)
	return out, err
}

// RemoveNode forgets a drained or down node without active tasks (the
// admin role); a node that is not answers an *APIError of CodeConflict (IsConflict). A
// repeat after an unknown outcome may answer CodeNotFound, the first
// having removed it.
func (c *Client) RemoveNode(ctx context.Context, node string) error {
	_, err := c.doJSON(ctx, &request{method: http.MethodDelete, path: PathNode + escSeg(node)}, nil)
	return err
}

// RegisterNode registers (or re-registers) the node spec describes.
// Registering again with the same spec changes nothing: it is safe to
// repeat.
func (c *Client) RegisterNode(ctx context.Context, spec NodeSpec) error {
	body, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("api: register node: encode: %w", err)
	}
	_, err = c.doJSON(ctx, &request{method: http.MethodPost, path: PathNodes, body: body, contentType: "application/json", repeatable: true}, nil)
	return err
}

// Target long-polls for node's target: it returns it with changed true as
// soon as its generation differs from generation, or changed false when
// wait passed without a change (304). The request's timeout is wait plus
// ClientConfig.Timeout. It asks for the pods' JobName and Count
// (identity=1), which a dispatcher of the release before refuses: upgrade
// the dispatchers before the nodelets.
func (c *Client) Target(ctx context.Context, node string, generation uint64, wait time.Duration) (t NodeTarget, changed bool, err error) {
	return c.target(ctx, node, generation, wait, false)
}

// TargetDiff is Target asking for the change since generation rather than
// the whole target: when the leader served the node generation last, t
// holds the pods added and the task IDs removed, with t.Base set to
// generation; otherwise the whole target, with t.Base 0.
func (c *Client) TargetDiff(ctx context.Context, node string, generation uint64, wait time.Duration) (t NodeTarget, changed bool, err error) {
	return c.target(ctx, node, generation, wait, true)
}

func (c *Client) target(ctx context.Context, node string, generation uint64, wait time.Duration, diff bool) (t NodeTarget, changed bool, err error) {
	v := url.Values{}
	v.Set("generation", strconv.FormatUint(generation, 10))
	if diff {
		v.Set("diff", "1")
	}
	v.Set("identity", "1")
	if wait > 0 {
		v.Set("wait", wait.String())
	}
	r := &request{method: http.MethodGet, path: PathNode + escSeg(node) + "/target", query: v.Encode(), wait: max(wait, 0)}
	rep, err := c.do(ctx, r)
	if err != nil || rep.status == http.StatusNotModified {
		return NodeTarget{}, false, err
	}
	if t, err = decodeOwnedNodeTarget(rep.body); err != nil {
		return NodeTarget{}, false, fmt.Errorf("api: %s %s: decode reply: %w", r.method, r.path, err)
	}
	return t, true, nil
}

// Report sends a node's task reports; it returns once they are committed.
// Delivery is at least once: sending a report again is harmless.
func (c *Client) Report(ctx context.Context, node string, reports []TaskReport) error {
	buf := reportBodies.Get().(*[]byte)
	defer reportBodies.Put(buf)
	body, err := AppendReportRequest((*buf)[:0], &ReportRequest{Reports: reports})
	if err != nil {
		return fmt.Errorf("api: report: encode: %w", err)
	}
	*buf = body
	_, err = c.doJSON(ctx, &request{method: http.MethodPost, path: PathNode + escSeg(node) + "/reports", body: body, contentType: "application/json", repeatable: true}, nil)
	return err
}

// reportBodies holds encoding buffers for Report: a node reports every
// state change of its pods, and the request copies the body it is given.
var reportBodies = sync.Pool{New: func() any { return new([]byte) }}

// Heartbeat sends a node's usage (a ReportRequest without reports); it
// returns once the leader has recorded it. It is a contact of the node
// too. Sending it again is harmless: the leader keeps the latest. A
// dispatcher of the release before refuses a usage with an overcommit
// status (a member it does not know): upgrade the dispatchers before the
// nodelets.
func (c *Client) Heartbeat(ctx context.Context, node string, usage NodeUsage) error {
	body, err := AppendReportRequest(nil, &ReportRequest{Reports: []TaskReport{}, Usage: &usage})
	if err != nil {
		return fmt.Errorf("api: heartbeat: encode: %w", err)
	}
	_, err = c.doJSON(ctx, &request{method: http.MethodPost, path: PathNode + escSeg(node) + "/reports", body: body, contentType: "application/json", repeatable: true}, nil)
	return err
}

// Ready returns nil when a replica answers PathReady with 200: it knows a
// leader and has applied the log it knows of. It asks each replica once,
// without pausing: the caller polls.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, &request{method: http.MethodGet, path: PathReady, once: true})
	return err
}
