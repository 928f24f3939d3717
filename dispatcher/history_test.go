package dispatcher_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/fsm"
)

// TestHistoryPruned runs a replica on a manual clock that forgets
// finished jobs after a minute into a history of at most three summaries
// kept for an hour: five jobs cancelled a second apart are forgotten into
// it, the two that ended first are pruned for the count, and the rest an
// hour later for their age. Without a history, forgotten jobs leave
// nothing.
func TestHistoryPruned(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("history=%v", keep), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			clk := clock.NewManual(time.Unix(1_800_000_000, 0))
			c := newCluster(t, 1, func(cfg *dispatcher.Config) {
				cfg.Clock, cfg.JobRetention, cfg.JobRetentionMax = clk, time.Minute, -1
				cfg.HistoryRetention, cfg.HistoryMax = time.Hour, 3
				if !keep {
					cfg.HistoryMax = -1
				}
			})
			r := c.leader()
			var ids []string
			for i := range 5 {
				ids = append(ids, r.submit(t, ctx, jobSpec(fmt.Sprintf("job-%d", i), 1, 100, 0, time.Hour)))
				if _, err := r.d.Cancel(ctx, ids[i]); err != nil {
					t.Fatal(err)
				}
				clk.Advance(time.Second)
				settle(t, r.d)
			}
			summaries := func() (out []string) {
				for _, id := range ids {
					if s, ok := r.f.Summary(id); ok {
						if s.State != fsm.JobCancelled || !s.History || s.Spec.Name == "" {
							t.Errorf("summary of %s: %+v", id, s)
						}
						out = append(out, id)
					}
				}
				return out
			}
			if got := summaries(); len(got) != 0 {
				t.Fatalf("summaries %v before any job was forgotten", got)
			}
			clk.Advance(time.Minute)
			settle(t, r.d)
			for _, id := range ids {
				if _, ok := r.f.Job(id); ok {
					t.Errorf("job %s kept past its retention", id)
				}
			}
			want := fmt.Sprint(ids[2:])
			if !keep {
				want = "[]"
			}
			if got := fmt.Sprint(summaries()); got != want {
				t.Fatalf("summaries after the jobs were forgotten: %s, want %s", got, want)
			}
			clk.Advance(time.Hour - 2*time.Minute)
			settle(t, r.d)
			if got := summaries(); keep && len(got) != 3 {
				t.Fatalf("summaries %v before their hour ended, want 3", got)
			}
			clk.Advance(2 * time.Minute)
			settle(t, r.d)
			if got := summaries(); len(got) != 0 || r.f.HistoryLen() != 0 {
				t.Fatalf("summaries %v an hour after the jobs ended, want none", got)
			}
		})
	}
}
