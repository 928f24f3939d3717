package e2ebench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseVmRSS(t *testing.T) {
	const head = "Name:\tsluice\nVmPeak:\t 9000 kB\n"
	for _, tc := range []struct {
		name, status string
		bytes        int64
		err          string
	}{
		{"plain", head + "VmRSS:\t  123456 kB\nRssAnon:\t 1 kB\n", 123456 << 10, ""},
		{"none", head, 0, "no VmRSS"},
		{"not kB", head + "VmRSS:\t 12 MB\n", 0, `VmRSS "12 MB"`},
		{"not a number", head + "VmRSS:\t 1x2 kB\n", 0, `VmRSS "1x2 kB"`},
	} {
		got, err := parseVmRSS([]byte(tc.status))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: parseVmRSS = %d, %v; want an error with %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.bytes {
			t.Errorf("%s: parseVmRSS = %d, %v; want %d", tc.name, got, err, tc.bytes)
		}
	}
}

// TestRSSSampler: the peak of this process's RSS is kept between takes,
// and a process that cannot be read (-1) counts 0.
func TestRSSSampler(t *testing.T) {
	s := startRSSSampler(context.Background(), []int{os.Getpid(), -1}, 5*time.Millisecond)
	defer s.stop()
	// Touch 64 MiB, let it be sampled, then drop it: the peak keeps it.
	big := make([]byte, 64<<20)
	for i := range big {
		if i%4096 == 0 {
			big[i] = 1
		}
	}
	before, _ := readRSS(os.Getpid())
	first := s.take()
	big = nil
	_ = big
	if len(first) != 2 || first[0] < float64(before)/(1<<20)-0.1 || first[0] < 64 || first[1] != 0 {
		t.Errorf("take = %v MiB, want at least this process's %v MiB (64 touched), and 0 for the missing one", first, float64(before)/(1<<20))
	}
	second := s.take()
	if second[0] <= 0 || second[1] != 0 {
		t.Errorf("second take = %v", second)
	}
}
