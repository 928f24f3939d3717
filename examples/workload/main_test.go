package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

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
	for _, args := range [][]string{nil, {"primes"}, {"primes", "x"}, {"primes", "-1"}, {"sleep", "soon"}, {"serve", "1", "x"}, {"env", "x"}, {"id", "x"}, {"shard"}, {"shard", "x"}, {"tally", "x"}, {"fly"}} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}

// TestShards checks that an array's shards cover 0..n once, and that their
// counts add up to the primes below n.
func TestShards(t *testing.T) {
	for _, tc := range []struct{ n, count int }{{1_000_000, 4}, {10, 3}, {7, 7}, {5, 8}} {
		next, sum := 0, 0
		for i := range tc.count {
			lo, hi := shard(tc.n, i, tc.count)
			if lo != next || hi < lo {
				t.Fatalf("n %d, shard %d of %d: [%d, %d), want it to start at %d", tc.n, i, tc.count, lo, hi, next)
			}
			next, sum = hi, sum+primes(hi-1)-primes(lo-1)
		}
		if next != tc.n || sum != primes(tc.n-1) {
			t.Errorf("n %d in %d shards: cover [0, %d), %d primes; want [0, %d), %d", tc.n, tc.count, next, sum, tc.n, primes(tc.n-1))
		}
	}
}

// TestShardNeedsIdentity: outside an array task, shard says what is
// missing.
func TestShardNeedsIdentity(t *testing.T) {
	for _, env := range [][2]string{{"", ""}, {"4", "4"}, {"-1", "4"}, {"0", "0"}} {
		t.Setenv("SLUICE_TASK_INDEX", env[0])
		t.Setenv("SLUICE_TASK_COUNT", env[1])
		if err := run([]string{"shard", "100"}); err == nil {
			t.Errorf("shard with index %q of %q = nil, want an error", env[0], env[1])
		}
	}
	t.Setenv("SLUICE_TASK_INDEX", "1")
	t.Setenv("SLUICE_TASK_COUNT", strconv.Itoa(2))
	if err := run([]string{"shard", "100"}); err != nil {
		t.Errorf("shard 1 of 2: %v", err)
	}
}

func TestTally(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "numbers.txt"), filepath.Join(dir, "primes.txt")
	if err := os.WriteFile(in, []byte("10 100\n1000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"tally", in, out}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if want := "4 primes up to 10\n25 primes up to 100\n78498 primes up to 1000000\n"; err != nil || string(b) != want {
		t.Errorf("result %q, %v; want %q", b, err, want)
	}
	if err := os.WriteFile(in, []byte("10 ten"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"tally", in, filepath.Join(dir, "bad.txt")}); err == nil {
		t.Error("tally of a file with a word = nil, want an error")
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.txt")); !os.IsNotExist(err) {
		t.Errorf("a failed tally left its result: %v", err)
	}
}
