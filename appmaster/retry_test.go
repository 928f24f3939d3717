package appmaster_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/appmaster"
	"github.com/sluicehq/sluice/clock"
)

// TestRunBacksOff: while the dispatcher refuses to list the capboxes, Run
// asks again after RetryMin, then after twice the last wait up to RetryMax,
// on its Clock; it returns nil when its context ends.
func TestRunBacksOff(t *testing.T) {
	var served atomic.Int64
	refused := make(chan struct{}, 16) // a list was refused
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if served.Add(1) == 1 { // Attach's list
			io.WriteString(w, `{"capboxes":[],"index":1}`)
			return
		}
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"error":{"code":"conflict","message":"not now"}}`)
		refused <- struct{}{}
	}))
	defer srv.Close()
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{srv.URL}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	clk := clock.NewManual(time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := appmaster.Attach(ctx, appmaster.Config{Client: c, RetryMin: 50 * time.Millisecond, RetryMax: 300 * time.Millisecond, Clock: clk}, "job-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()

	for i, want := range []time.Duration{50, 100, 200, 300, 300} {
		want *= time.Millisecond
		select {
		case <-refused:
		case <-ctx.Done():
			t.Fatalf("list %d never came", i+1)
		}
		if err := clk.WaitTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if d, _ := clk.Next(); d != want {
			t.Fatalf("wait after refusal %d = %v, want %v", i+1, d, want)
		}
		clk.Advance(want)
	}
	<-refused
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v after its context ended, want nil", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not return after its context ended")
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the test ran out of time")
	}
}
