package overcommitbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// probe asks the probe server, one request at a time over one kept-alive
// connection, from this host.
type probe struct {
	url string
	tr  *http.Transport
	hc  *http.Client
}

// probeTimeout bounds one request; one that takes longer counts as an
// error.
const probeTimeout = 2 * time.Second

func newProbe(url string) *probe {
	tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
	return &probe{url: url, tr: tr, hc: &http.Client{Transport: tr, Timeout: probeTimeout}}
}

func (p *probe) close() { p.tr.CloseIdleConnections() }

// get asks once and returns the time to the whole answer.
func (p *probe) get(ctx context.Context) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	d := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", p.url, resp.Status)
	}
	return d, nil
}

// ready waits up to timeout for the server to answer.
func (p *probe) ready(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := p.get(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("overcommitbench: the probe server at %s did not answer within %s: %w", p.url, timeout, err)
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
}

// probeStats are one phase's answers.
type probeStats struct {
	n, errors int
	p50, p99  float64 // milliseconds
}

// run asks at rate requests per second for d and returns the latencies'
// p50 and p99 and the count of failed requests. It fails when no request
// succeeded.
func (p *probe) run(ctx context.Context, d time.Duration, rate float64) (probeStats, error) {
	every := time.Duration(float64(time.Second) / rate)
	t := time.NewTicker(every)
	defer t.Stop()
	end := time.Now().Add(d)
	var (
		lats []time.Duration
		st   probeStats
		last error
	)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("overcommitbench: probe: %w", ctx.Err())
		case <-t.C:
		}
		lat, err := p.get(ctx)
		if err != nil {
			st.errors++
			last = err
			continue
		}
		lats = append(lats, lat)
	}
	st.n = len(lats) + st.errors
	if len(lats) == 0 {
		return st, fmt.Errorf("overcommitbench: probe: no request of %d succeeded: %w", st.n, errors.Join(last, errors.New("no answer")))
	}
	st.p50, st.p99 = percentiles(lats)
	return st, nil
}

// percentiles returns the p50 and p99 of lats in milliseconds (the
// nearest rank); it sorts lats.
func percentiles(lats []time.Duration) (p50, p99 float64) {
	slices.Sort(lats)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	i99 := min(len(lats)-1, (len(lats)*99+99)/100-1)
	return ms(lats[(len(lats)-1)/2]), ms(lats[i99])
}
