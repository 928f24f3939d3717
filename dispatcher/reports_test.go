package dispatcher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/dispatcher"
)

// TestReportsRideOneRound: the Report calls of two nodes that arrive
// within ReportWait wait for it on the Dispatcher's clock, then ride one
// round of the report batcher; a report the FSM refuses (an unknown task)
// is dropped and counted, and the calls succeed. After Close a Report
// fails at once.
func TestReportsRideOneRound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const wait = 50 * time.Millisecond
	clk := clock.NewManual(time.Time{})
	c := newCluster(t, 1, func(cfg *dispatcher.Config) { cfg.Clock, cfg.ReportWait = clk, wait })
	r := c.leader()
	nodes := []string{"n1", "n2"}
	for _, n := range nodes {
		if err := r.d.Register(ctx, nodeSpec(n, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() {
			errs <- r.d.Report(ctx, n, []api.TaskReport{{TaskID: "nojob/0/0/1", State: api.TaskRunning, Time: clk.Now()}})
		}()
	}
	waitFor(t, 10*time.Second, "both reports in the batcher", func() bool {
		return dispatcher.ReportStats(r.d).Pending == len(nodes)
	})
	clk.Advance(wait - time.Millisecond)
	if st := dispatcher.ReportStats(r.d); st.Pending != len(nodes) || len(errs) != 0 {
		t.Fatalf("before ReportWait: %+v, %d calls returned; want both held", st, len(errs))
	}
	clk.Advance(time.Millisecond)
	for range nodes {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("Report: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("a Report did not return once ReportWait passed")
		}
	}
	if st := dispatcher.ReportStats(r.d); st.RoundsByWait != 1 || st.RoundsBySize != 0 || st.Taken != uint64(len(nodes)) {
		t.Errorf("report batcher %+v, want one round by wait of both calls", st)
	}
	if n := r.d.DroppedReports(); n != int64(len(nodes)) {
		t.Errorf("dropped %d reports, want %d", n, len(nodes))
	}
	r.close()
	if err := r.d.Report(ctx, "n1", []api.TaskReport{{TaskID: "nojob/0/0/1", State: api.TaskRunning}}); !errors.Is(err, dispatcher.ErrClosed) {
		t.Errorf("Report after Close: %v, want ErrClosed", err)
	}
}
