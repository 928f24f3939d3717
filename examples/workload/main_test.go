package main

import "testing"

func TestPrimes(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, 0}, {1, 0}, {2, 1}, {3, 2}, {10, 4}, {100, 25}, {1_000_000, 78498},
	} {
		if got := primes(tc.n); got != tc.want {
			t.Errorf("primes(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	for _, args := range [][]string{nil, {"primes"}, {"primes", "x"}, {"primes", "-1"}, {"sleep", "soon"}, {"serve", "1", "x"}, {"env", "x"}, {"fly"}} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}
