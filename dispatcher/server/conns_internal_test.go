package server

import (
	"math"
	"testing"
)

func TestConnsWithin(t *testing.T) {
	for _, tc := range []struct {
		files    uint64
		replicas int
		want     int
	}{
		{20000, 1, 18800},
		{20000, 3, 16400},
		{20000, 0, 18800},
		{1024, 1, 256},  // less than the reserve: a quarter
		{4800, 3, 1200}, // exactly four thirds of three reserves
		{1 << 40, 1, math.MaxInt32 - FileReserve}, // unlimited, in effect
	} {
		if got := connsWithin(tc.files, tc.replicas); got != tc.want {
			t.Errorf("connsWithin(%d files, %d replicas) = %d, want %d", tc.files, tc.replicas, got, tc.want)
		}
	}
}
