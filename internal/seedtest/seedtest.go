package seedtest

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// Env is the environment variable that fixes the seed.
const Env = "SLUICE_SEED"

// Rand returns a generator seeded from SLUICE_SEED or the clock, and logs
// the seed on t.
func Rand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(Env); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", Env, v, err)
		}
		seed = s
	}
	t.Logf("seed %d (replay with %s=%d)", seed, Env, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5eed))
}
