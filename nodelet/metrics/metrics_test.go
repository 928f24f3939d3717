package metrics_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/metrics"
)

// TestObserver checks what the Observer methods record, by tier and
// result, and that the text lints.
func TestObserver(t *testing.T) {
	m := metrics.New(metrics.Config{})
	m.PodStarted(cgroup.Online, 20*time.Millisecond)
	m.PodStarted(cgroup.Offline, time.Second)
	m.PodStarted(cgroup.Offline, time.Second)
	m.TargetPolled(30*time.Second, nil)
	m.TargetPolled(time.Millisecond, errors.New("refused"))
	m.Reported(2*time.Millisecond, nil)
	var buf bytes.Buffer
	if err := m.Write(&buf); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, want := range []string{
		`sluice_nodelet_pod_start_duration_seconds_count{tier="online"} 1`,
		`sluice_nodelet_pod_start_duration_seconds_count{tier="offline"} 2`,
		`sluice_nodelet_pod_start_duration_seconds_sum{tier="offline"} 2`,
		`sluice_nodelet_target_poll_duration_seconds_count{result="ok"} 1`,
		`sluice_nodelet_target_poll_duration_seconds_count{result="error"} 1`,
		`sluice_nodelet_report_duration_seconds_count{result="ok"} 1`,
		`sluice_nodelet_report_duration_seconds_count{result="error"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no line %q in:\n%s", want, text)
		}
	}
	if strings.Contains(text, "go_goroutines") {
		t.Error("the Go collector is registered without Config.Process")
	}
	probs, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil || len(probs) > 0 {
		t.Errorf("lint: %v %v", probs, err)
	}
}
