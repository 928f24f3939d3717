package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/promtest"
	"github.com/sluicehq/sluice/nodelet/remote/remotetest"
)

// getMetrics gets url with token ("": none) and returns the status and
// body.
func getMetrics(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestNodeletMetrics scrapes a nodelet's log server running two pods, one
// of each tier, and checks the text against what runs; only the metrics
// token opens it.
func TestNodeletMetrics(t *testing.T) {
	stub := remotetest.Start(t, "")
	tokenFile := filepath.Join(t.TempDir(), "metrics-token")
	if err := os.WriteFile(tokenFile, []byte("mt\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeletWait)
	defer cancel()
	stop, err := startNodelet(ctx, nodeletConfig{
		dispatchers: []string{stub.URL}, name: "n1", runtime: "sim", cpu: 2000, memory: 1 << 30, disk: 10 << 30,
		metricsTokenFile: tokenFile,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	spec, _, _ := stub.Node("n1")
	pod := func(id string, q api.QoS) api.TargetPod {
		return api.TargetPod{TaskID: id, Job: "j1", Group: "g0", QoS: q, Pod: api.PodSpec{
			Containers: []api.ContainerSpec{{Name: "c0", Image: api.Image{Rootfs: "/img"}, Command: []string{"x"},
				Resources: api.Resources{CPU: 100, Memory: 1 << 20}}},
		}}
	}
	stub.SetTarget("n1", pod("j1/0/0/0", api.QoSOnline), pod("j1/0/1/0", api.QoSOffline))
	stub.Await(t, nodeletWait, "both pods running", func() bool {
		n := 0
		for _, r := range stub.Reports("n1") {
			if r.State == api.TaskRunning {
				n++
			}
		}
		return n == 2
	})

	url := "http://" + spec.Address + api.PathMetrics
	for tok, want := range map[string]int{"": 401, "wrong": 401, spec.LogToken: 401} {
		if st, body := getMetrics(t, url, tok); st != want {
			t.Errorf("metrics with token %q: %d, want %d: %s", tok, st, want, body)
		}
	}
	// A report counts once its acknowledgment is back, which may be after
	// the stub holds it.
	var mfs map[string]*dto.MetricFamily
	stub.Await(t, nodeletWait, "two reports acknowledged", func() bool {
		st, body := getMetrics(t, url, "mt")
		if st != 200 {
			t.Fatalf("metrics: %d %s", st, body)
		}
		mfs = promtest.Parse(t, body)
		return promtest.Value(t, mfs, "sluice_nodelet_reports_total") >= 2
	})
	for metric, want := range map[string]float64{
		"sluice_nodelet_pods|state=running|tier=online":            1,
		"sluice_nodelet_pods|state=running|tier=offline":           1,
		"sluice_nodelet_pods|state=starting|tier=offline":          0,
		"sluice_nodelet_pod_starts_total":                          2,
		"sluice_nodelet_pod_start_duration_seconds|tier=online":    1,
		"sluice_nodelet_pod_start_duration_seconds|tier=offline":   1,
		"sluice_nodelet_pod_start_failures_total|reason=runtime":   0,
		"sluice_nodelet_pod_kills_total|reason=unwanted":           0,
		"sluice_nodelet_report_duration_seconds|result=error":      0,
		"sluice_nodelet_target_poll_duration_seconds|result=error": 0,
	} {
		f := strings.Split(metric, "|")
		if v := promtest.Value(t, mfs, f[0], f[1:]...); v != want {
			t.Errorf("%s = %v, want %v", metric, v, want)
		}
	}
	if v := promtest.Value(t, mfs, "sluice_nodelet_target_poll_duration_seconds", "result=ok"); v < 1 {
		t.Errorf("target polls %v, want at least 1", v)
	}
	if v := promtest.Value(t, mfs, "go_goroutines"); v <= 0 {
		t.Errorf("go_goroutines %v", v)
	}

	// The online pod goes: it is counted as stopped unwanted.
	stub.SetTarget("n1", pod("j1/0/1/0", api.QoSOffline))
	stub.Await(t, nodeletWait, "the online pod killed", func() bool {
		for _, r := range stub.Reports("n1") {
			if r.TaskID == "j1/0/0/0" && r.State == api.TaskKilled {
				return true
			}
		}
		return false
	})
	_, body := getMetrics(t, url, "mt")
	mfs = promtest.Parse(t, body)
	if v := promtest.Value(t, mfs, "sluice_nodelet_pod_kills_total", "reason=unwanted"); v != 1 {
		t.Errorf("unwanted kills %v, want 1", v)
	}
	if v := promtest.Value(t, mfs, "sluice_nodelet_pods", "state=running", "tier=online"); v != 0 {
		t.Errorf("online pods running %v, want 0", v)
	}
}

// TestNodeletMetricsOff checks that --metrics=false leaves /metrics
// unserved.
func TestNodeletMetricsOff(t *testing.T) {
	stub := remotetest.Start(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), nodeletWait)
	defer cancel()
	stop, err := startNodelet(ctx, nodeletConfig{
		dispatchers: []string{stub.URL}, name: "n1", runtime: "sim", cpu: 2000, memory: 1 << 30, disk: 10 << 30, noMetrics: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	spec, _, _ := stub.Node("n1")
	if st, _ := getMetrics(t, "http://"+spec.Address+api.PathMetrics, ""); st != 404 {
		t.Errorf("metrics off: status %d, want 404", st)
	}
}
