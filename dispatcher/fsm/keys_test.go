package fsm

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/seedtest"
)

// parseTaskIDSlow is parseTaskID by strconv, field by field: what the
// one-pass parser must agree with.
func parseTaskIDSlow(id string) (taskKey, uint32, bool) {
	parts := strings.Split(id, "/")
	if len(parts) != 4 || len(parts[0]) < 2 || parts[0][0] != 'j' || parts[0][1] == '0' {
		return taskKey{}, 0, false
	}
	j, err0 := strconv.ParseUint(parts[0][1:], 10, 64)
	g, err1 := strconv.ParseUint(parts[1], 10, 16)
	i, err2 := strconv.ParseUint(parts[2], 10, 32)
	a, err3 := strconv.ParseUint(parts[3], 10, 32)
	if err0 != nil || err1 != nil || err2 != nil || err3 != nil {
		return taskKey{}, 0, false
	}
	return taskKey{j, uint16(g), uint32(i)}, uint32(a), true
}

// TestParseTaskID checks the task ID parser on IDs at and past the edges
// of every field, then on random strings over the IDs' alphabet against
// strconv's reading.
func TestParseTaskID(t *testing.T) {
	for _, tc := range []struct {
		id      string
		key     taskKey
		attempt uint32
		ok      bool
	}{
		{"j1/0/0/1", taskKey{1, 0, 0}, 1, true},
		{"j42/3/17/2", taskKey{42, 3, 17}, 2, true},
		{"j18446744073709551615/65535/4294967295/4294967295", taskKey{1<<64 - 1, 1<<16 - 1, 1<<32 - 1}, 1<<32 - 1, true},
		{"j1/007/0/1", taskKey{1, 7, 0}, 1, true},
		{"j18446744073709551616/0/0/1", taskKey{}, 0, false},
		{"j1/65536/0/1", taskKey{}, 0, false},
		{"j1/0/4294967296/1", taskKey{}, 0, false},
		{"j1/0/0/4294967296", taskKey{}, 0, false},
		{"j0/0/0/1", taskKey{}, 0, false},
		{"j01/0/0/1", taskKey{}, 0, false},
		{"j/0/0/1", taskKey{}, 0, false},
		{"x1/0/0/1", taskKey{}, 0, false},
		{"j1/0/0", taskKey{}, 0, false},
		{"j1/0/0/", taskKey{}, 0, false},
		{"j1//0/1", taskKey{}, 0, false},
		{"j1/0/0/1/", taskKey{}, 0, false},
		{"j1/0/0/1/2", taskKey{}, 0, false},
		{"j1/0/+1/1", taskKey{}, 0, false},
		{"j1/0/1_0/1", taskKey{}, 0, false},
		{"j1/0/0/1 ", taskKey{}, 0, false},
		{"", taskKey{}, 0, false},
		{"j", taskKey{}, 0, false},
	} {
		key, attempt, ok := parseTaskID(tc.id)
		if key != tc.key || attempt != tc.attempt || ok != tc.ok {
			t.Errorf("parseTaskID(%q) = %v, %d, %v; want %v, %d, %v", tc.id, key, attempt, ok, tc.key, tc.attempt, tc.ok)
		}
	}
	r := seedtest.Rand(t)
	const alphabet = "j0123456789/+-_ x"
	for range 200_000 {
		b := make([]byte, r.IntN(16))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if r.IntN(2) == 0 && len(b) > 0 {
			b[0] = 'j'
		}
		id := string(b)
		key, attempt, ok := parseTaskID(id)
		wkey, wattempt, wok := parseTaskIDSlow(id)
		if key != wkey || attempt != wattempt || ok != wok {
			t.Fatalf("parseTaskID(%q) = %v, %d, %v; strconv reads %v, %d, %v", id, key, attempt, ok, wkey, wattempt, wok)
		}
	}
	for range 10_000 {
		k, a := taskKey{r.Uint64(), uint16(r.Uint32()), r.Uint32()}, r.Uint32()
		if k.job == 0 {
			k.job = 1
		}
		if key, attempt, ok := parseTaskID(taskID(k, a)); key != k || attempt != a || !ok {
			t.Fatalf("parseTaskID(taskID(%v, %d)) = %v, %d, %v", k, a, key, attempt, ok)
		}
	}
}

func BenchmarkParseTaskID(b *testing.B) {
	id := taskID(taskKey{1234567, 0, 17}, 1)
	for b.Loop() {
		if _, _, ok := parseTaskID(id); !ok {
			b.Fatal("not parsed")
		}
	}
}
