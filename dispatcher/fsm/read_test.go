package fsm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLoadRejectsJobNumberOutOfSequence checks that Load refuses a job
// record numbered 0 or at or beyond the job sequence (jobs are held in a
// table indexed by number) with an error naming the number.
func TestLoadRejectsJobNumberOutOfSequence(t *testing.T) {
	for _, num := range []uint64{0, 3, 1 << 40} {
		st := newMemStore()
		cmd, _ := SubmitJobs(time.Unix(1, 0), benchSpecs(2, true))
		if _, _, err := st.apply(New(), 1, cmd); err != nil {
			t.Fatal(err)
		}
		st.m[string(jobKey(num))] = st.m[string(jobKey(2))]
		err := New().Load(st)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("numbered %d,", num)) {
			t.Errorf("job record numbered %d: Load: %v", num, err)
		}
	}
}

// TestJobsPages checks Jobs' cursor: the jobs after the one named, in
// number order, at most Limit of them.
func TestJobsPages(t *testing.T) {
	st := newMemStore()
	f := New()
	cmd, _ := SubmitJobs(time.Unix(1, 0), benchSpecs(5, true))
	if _, _, err := st.apply(f, 1, cmd); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		after string
		limit int
		want  string
	}{
		{"", 0, "j1 j2 j3 j4 j5"},
		{"j2", 0, "j3 j4 j5"},
		{"j2", 2, "j3 j4"},
		{"j5", 0, ""},
		{"j99", 0, ""},
		{"j18446744073709551615", 0, ""},
		{"not-a-job", 1, "j1"},
	} {
		var ids []string
		for _, j := range f.Jobs(JobFilter{After: tc.after, Limit: tc.limit}) {
			ids = append(ids, j.ID)
		}
		if got := strings.Join(ids, " "); got != tc.want {
			t.Errorf("Jobs(after %q, limit %d) = %q, want %q", tc.after, tc.limit, got, tc.want)
		}
	}
}
