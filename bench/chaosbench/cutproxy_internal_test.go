package chaosbench

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestCutProxyRewritesRedirectsAndCuts checks that a follower's redirect
// to the leader names the same nodelet's proxy for the leader, that a cut
// drops a request in flight and refuses new ones, and that a heal lets
// them through again.
func TestCutProxyRewritesRedirectsAndCuts(t *testing.T) {
	hanging := make(chan struct{}, 1)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			hanging <- struct{}{}
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer leader.Close()
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", leader.URL+r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	defer follower.Close()
	pf, err := newCutProxy("127.0.0.1", follower.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	pl, err := newCutProxy("127.0.0.1", leader.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	rw := map[string]string{follower.URL: pf.base(), leader.URL: pl.base()}
	pf.setRewrite(rw)
	pl.setRewrite(rw)

	hc := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(pf.base() + "/v1/jobs?x=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, want := resp.Header.Get("Location"), pl.base()+"/v1/jobs?x=1"; resp.StatusCode != http.StatusTemporaryRedirect || got != want {
		t.Fatalf("redirect %d to %q, want 307 to %q (the proxy for the leader)", resp.StatusCode, got, want)
	}

	done := make(chan error, 1)
	go func() {
		resp, err := hc.Get(pl.base() + "/hang")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case <-hanging:
	case <-time.After(4 * time.Second):
		t.Fatal("the request did not reach the leader through the proxy")
	}
	cutAt := time.Now()
	pl.setCut(true)
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("a request in flight was answered across a cut")
		}
		if d := time.Since(cutAt); d > 2*time.Second {
			t.Errorf("the request in flight ended %v after the cut", d)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("a request in flight still hangs 4s after the cut")
	}
	if resp, err := hc.Get(pl.base() + "/"); err == nil {
		resp.Body.Close()
		t.Errorf("a new request was answered %d across a cut", resp.StatusCode)
	}
	pl.setCut(false)
	resp, err = hc.Get(pl.base() + "/")
	if err != nil {
		t.Fatalf("after the heal: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("after the heal: %d, want 204", resp.StatusCode)
	}
}

// TestReadEvidence checks that a pod started again on its node while it
// ran is reported, and that runs without an end are open at now.
func TestReadEvidence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pods.log")
	log := "start 100 n1 j1.0.0.1\n" +
		"start 110 n1 j1.0.1.1\n" +
		"start 120 n1 j1.0.0.1\n" + // the same pod again: run twice
		"start 130 n2 j1.0.1.2\n" +
		"end 150 n1 j1.0.1.1\n" +
		"end 160 n1 j1.0.0.1\n" +
		"garbled\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 1000)
	runs, twice, err := readEvidence(path, now)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(twice, []string{"n1 j1.0.0.1"}) {
		t.Errorf("started twice: %v, want [n1 j1.0.0.1]", twice)
	}
	if len(runs) != 4 || runs[0].end != 160 || runs[2].end != 160 || runs[1].end != 150 {
		t.Errorf("runs %+v", runs)
	}
	if open := openRuns(runs, now); len(open) != 1 || open[0].pod != "j1.0.1.2" {
		t.Errorf("open runs %+v, want j1.0.1.2 only", open)
	}
	// j1.0.0 ran twice on n1 over [120,160]; j1.0.1 on n1 [110,150] and
	// on n2 from 130.
	if d := doubleRuns(runs); d.Tasks != 2 {
		t.Errorf("double runs %+v", d)
	}
	if _, _, err := readEvidence(filepath.Join(t.TempDir(), "none"), now); err == nil {
		t.Error("a missing evidence log read without an error")
	}
	if err := os.WriteFile(path, []byte("start x n1 p\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readEvidence(path, now); err == nil {
		t.Error("a line with a bad time read without an error")
	}
}
