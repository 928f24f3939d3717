package e2ebench

import (
	"slices"
	"strings"
	"testing"
)

// TestSoakVerdict: every row's reasons, the whole soak's, tasks left
// unplaced and a growing memory fail a soak; a memory not judged, or
// grown while the cluster fell behind, is noted.
func TestSoakVerdict(t *testing.T) {
	row := func(n int, placed float64, reasons ...string) SoakRow {
		return SoakRow{Row: n, OfferedTasksPerSec: 1000, PlacedTasksPerSec: placed, Reasons: reasons, Holds: len(reasons) == 0}
	}
	r := SoakResult{Settle: 1,
		Rows:  []SoakRow{row(1, 500, "placed 500 of 1000 tasks/s offered (50%, want 90%)"), row(2, 1000), row(3, 800, "placed 800"), row(4, 1000)},
		Total: Step{Reasons: []string{"3 requests failed"}, UnplacedTasks: 12},
		Memory: []MemoryTrend{
			{Process: "bench", FromRow: 2, Rows: 3, Judged: true, Flat: true},
			{Process: "fleet-1", FromRow: 2, Rows: 3, FirstMiB: 100, LastMiB: 130, SlopeMiBPerMin: 15, LimitMiBPerMin: 4, Judged: true},
			{Process: "fleet-2", FromRow: 2, Rows: 2, Flat: true},
		}}
	reasons, notes := soakVerdict(r)
	want := []string{"row 1: placed 500 of 1000 tasks/s offered (50%, want 90%)", "row 3: placed 800", "whole soak: 3 requests failed",
		"whole soak: 12 tasks committed and not seen placed by the end of the drain",
		"memory of fleet-1 grows 15.0 MiB/min over rows 2 to 4 (100 to 130 MiB), above 4.0"}
	if !slices.Equal(reasons, want) {
		t.Errorf("reasons %q\nwant %q", reasons, want)
	}
	if len(notes) != 2 || !strings.Contains(notes[0], "memory of fleet-2 not judged: 2 rows after the first 1, want 3 or more") ||
		!strings.Contains(notes[1], "fell behind (1 of the rows judged") {
		t.Errorf("notes %q", notes)
	}
	// Every row held and memory flat: nothing to say.
	r = SoakResult{Settle: 1, Rows: []SoakRow{row(1, 1000), row(2, 1000)}, Memory: []MemoryTrend{{Process: "bench", Judged: true, Flat: true}}}
	if reasons, notes := soakVerdict(r); reasons != nil || notes != nil {
		t.Errorf("a soak that held: reasons %q, notes %q", reasons, notes)
	}
}
