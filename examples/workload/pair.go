package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/api"
)

// permanentError is a fetch failure that trying again cannot mend.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// httpServeCmd is `workload http-serve [-port NAME] [-requests N]
// [-timeout D]`: it serves HTTP on 0.0.0.0 at the pod's port NAME (its
// SLUICE_PORT_<NAME>), answering every GET with its task ID and the
// request's number, until it has answered N, then exits 0; when D passes
// first it fails, saying how many it answered.
func httpServeCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("http-serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	port := fs.String("port", "http", "the name of the pod's port to serve on")
	requests := fs.Int("requests", 1, "how many requests to answer before exiting")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for them")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("http-serve: %w", err)
	}
	if fs.NArg() != 0 || *requests < 1 || *timeout <= 0 {
		return errors.New("http-serve: usage: http-serve [-port NAME] [-requests N >= 1] [-timeout D > 0]")
	}
	env := api.PortEnvName(*port)
	p, err := strconv.ParseUint(os.Getenv(env), 10, 16)
	if err != nil || p == 0 {
		return fmt.Errorf("http-serve: %s is %q, not a port: run it in a pod that asks for a port named %q", env, os.Getenv(env), *port)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.FormatUint(p, 10)))
	if err != nil {
		return fmt.Errorf("http-serve: %w", err)
	}
	return httpServe(l, os.Getenv(api.EnvTaskID), *requests, *timeout, stdout)
}

// httpServe serves on l (which it closes) until it has answered requests
// GETs, each with the task's ID and the request's number, then returns
// nil; when timeout passes first it returns an error saying how many it
// answered. A request beyond the count is answered 503.
func httpServe(l net.Listener, task string, requests int, timeout time.Duration, stdout io.Writer) error {
	var (
		answered atomic.Int64
		outMu    sync.Mutex
		once     sync.Once
		done     = make(chan struct{})
	)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		n := answered.Add(1)
		if n > int64(requests) {
			http.Error(w, "answered all my requests; exiting", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "task %s answered request %d of %d\n", task, n, requests)
		outMu.Lock()
		fmt.Fprintf(stdout, "answered request %d of %d from %s\n", n, requests, r.RemoteAddr)
		outMu.Unlock()
		if n == int64(requests) {
			once.Do(func() { close(done) })
		}
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(stdout, "task %s serving on %s until %d requests or %s\n", task, l.Addr(), requests, timeout)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var err error
	select {
	case <-done:
	case <-timer.C:
		err = fmt.Errorf("http-serve: %s passed with %d of %d requests answered", timeout, min(answered.Load(), int64(requests)), requests)
	case err = <-served:
		return fmt.Errorf("http-serve: %w", err)
	}
	// Shutdown lets the last answer go out before the server stops.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := srv.Shutdown(ctx); serr != nil && err == nil {
		err = fmt.Errorf("http-serve: shutdown: %w", serr)
	}
	<-served
	return err
}

// fetchConfig is what fetch needs.
type fetchConfig struct {
	addrs []string      // dispatcher base URLs
	token string        // bearer token; "" sends none
	job   string        // the job whose server to find
	group string        // the server's task group
	port  string        // the name of the server's port
	path  string        // the path to GET
	wait  time.Duration // how long to try
	pause time.Duration // between tries
}

// fetchCmd is `workload fetch [-group G] [-port NAME] [-path P] [-wait D]
// [-token-file FILE]`: see fetch. The dispatcher's URLs and the job come
// from SLUICE_ADDR and SLUICE_JOB_ID; the token from FILE, else
// SLUICE_TOKEN when the node set it (an appmaster job's), else none.
func fetchCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("fetch", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := fetchConfig{pause: 250 * time.Millisecond}
	fs.StringVar(&c.group, "group", "server", "the task group of the server")
	fs.StringVar(&c.port, "port", "http", "the name of the server's port")
	fs.StringVar(&c.path, "path", "/", "the path to GET")
	fs.DurationVar(&c.wait, "wait", time.Minute, "how long to try")
	tokenFile := fs.String("token-file", "", "a file holding a reader token for the dispatcher")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	if fs.NArg() != 0 || c.wait <= 0 || !strings.HasPrefix(c.path, "/") {
		return errors.New("fetch: usage: fetch [-group G] [-port NAME] [-path /P] [-wait D > 0] [-token-file FILE]")
	}
	var missing []string
	for _, v := range []struct {
		name string
		to   *string
	}{{api.EnvAddr, nil}, {api.EnvJobID, &c.job}} {
		s := os.Getenv(v.name)
		if s == "" {
			missing = append(missing, v.name)
		} else if v.to != nil {
			*v.to = s
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("fetch: %s not set: run it as a task of a job on a node that sets them", strings.Join(missing, " and "))
	}
	c.addrs = strings.Split(os.Getenv(api.EnvAddr), ",")
	c.token = os.Getenv(api.EnvToken)
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("fetch: token: %w", err)
		}
		if c.token = strings.TrimSpace(string(b)); c.token == "" {
			return fmt.Errorf("fetch: token file %s is empty", *tokenFile)
		}
	}
	return fetch(ctx, c, stdout)
}

// fetch finds the running task of group c.group in job c.job through the
// dispatcher's task listing, GETs c.path of it at its host and its port
// named c.port, and prints the answer. It tries again, every c.pause,
// while the server is not running yet or does not answer, for up to
// c.wait; a refusal of the dispatcher's (no such job, a token it does not
// take) or a server without the port ends it at once.
func fetch(ctx context.Context, c fetchConfig, stdout io.Writer) error {
	client, err := api.NewClient(api.ClientConfig{Addrs: c.addrs, Token: c.token, Timeout: 5 * time.Second, Rounds: 1})
	if err != nil {
		return fmt.Errorf("fetch: %s: %w", api.EnvAddr, err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	var last error
	for {
		url, task, host, err := findServer(ctx, client, c)
		if err == nil {
			var body string
			if body, err = get(ctx, hc, url); err == nil {
				fmt.Fprintf(stdout, "fetched %s from task %s: %s\n", url, task, strings.TrimSpace(body))
				return nil
			}
			if ip, perr := netip.ParseAddr(host); perr == nil && ip.IsLoopback() {
				err = fmt.Errorf("%w (the listing's host %s is loopback, which in a bridge-mode pod is the pod itself: the server's node registered no host IP)", err, host)
			}
		}
		if pe := (permanentError{}); errors.As(err, &pe) {
			return err
		}
		if last == nil || ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			last = err // not the deadline cutting a try short
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fetch: gave up after %s: %w", c.wait, last)
		case <-time.After(c.pause):
		}
	}
}

// findServer returns the URL of c.path on the running task of c.group,
// the task's ID and its listed host.
func findServer(ctx context.Context, client *api.Client, c fetchConfig) (url, task, host string, err error) {
	var seen []string
	for after := ""; ; {
		list, err := client.Tasks(ctx, c.job, after, 0)
		switch code := api.ErrorCode(err); {
		case code == api.CodeUnauthorized || code == api.CodeForbidden:
			return "", "", "", permanentError{fmt.Errorf("fetch: the dispatcher refused to list job %s's tasks: %w (with authentication on, fetch needs a reader token: -token-file)", c.job, err)}
		case code == api.CodeNotFound:
			return "", "", "", permanentError{fmt.Errorf("fetch: job %s: %w", c.job, err)}
		case err != nil:
			return "", "", "", fmt.Errorf("fetch: list job %s's tasks: %w", c.job, err)
		}
		for _, t := range list.Tasks {
			if t.Group != c.group {
				continue
			}
			if t.State != api.TaskRunning {
				seen = append(seen, t.ID+" "+t.State.String())
				continue
			}
			i := -1
			for j, p := range t.Ports {
				if p.Name == c.port {
					i = j
				}
			}
			switch {
			case i < 0:
				return "", "", "", permanentError{fmt.Errorf("fetch: task %s of group %s has no port named %q", t.ID, c.group, c.port)}
			case t.Host == "":
				seen = append(seen, t.ID+" running on node "+t.Node+", which gives no host")
				continue
			}
			return "http://" + net.JoinHostPort(t.Host, strconv.Itoa(int(t.Ports[i].Port))) + c.path, t.ID, t.Host, nil
		}
		if list.Next == "" {
			break
		}
		after = list.Next
	}
	if len(seen) == 0 {
		return "", "", "", fmt.Errorf("fetch: job %s has no placed task of group %q yet", c.job, c.group)
	}
	return "", "", "", fmt.Errorf("fetch: no task of group %q of job %s runs yet: %s", c.group, c.job, strings.Join(seen, ", "))
}

// get GETs url and returns its body, read up to 64 KiB, when it answers
// 200.
func get(ctx context.Context, hc *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", permanentError{fmt.Errorf("fetch: %w", err)}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetch: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("fetch: GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetch: GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}
