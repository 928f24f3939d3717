package layouttest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/codecgen"
	"github.com/sluicehq/sluice/internal/codecgen/layouttest/schema"
)

// TestGeneratedCodecsCurrent fails when running the package's go:generate
// directive would change layout_gen.go.
func TestGeneratedCodecsCurrent(t *testing.T) {
	if err := codecgen.Check("."); err != nil {
		t.Fatal(err)
	}
}

// full is a job with every field set.
var full = schema.Job{Name: "j", Count: 7, Parts: []schema.Part{{K: "a", On: true}, {K: "b"}},
	Pod: schema.Pod{X: -3}, Owner: "o", Pol: &schema.Pol{N: 9}}

// TestLayouts decodes a job written in each layout, as the codec of its
// layout wrote it, to the job with the fields of later layouts zero; and
// round-trips the current layout, which the skimmer reads alike.
func TestLayouts(t *testing.T) {
	if specLayout != 3 {
		t.Fatalf("specLayout = %d, want 3, the highest since=", specLayout)
	}
	// What each layout wrote, field by field.
	write := func(l int) []byte {
		var e enc
		e.str("j")
		e.varint(7)
		e.uvarint(2)
		for _, p := range []schema.Part{{K: "a", On: true}, {K: "b"}} {
			e.str(p.K)
			if l >= 2 {
				e.bool(p.On)
			}
		}
		if l == 0 {
			e.byte(1) // the legacy pod's flags: X follows
		}
		e.varint(-3)
		if l >= 2 {
			e.str("o")
		}
		if l >= 3 {
			e.bool(true)
			e.varint(9)
		}
		return e.b
	}
	want := map[int]schema.Job{
		0: {Name: "j", Count: 7, Parts: []schema.Part{{K: "a"}, {K: "b"}}, Pod: schema.Pod{X: -3}},
		1: {Name: "j", Count: 7, Parts: []schema.Part{{K: "a"}, {K: "b"}}, Pod: schema.Pod{X: -3}},
		2: {Name: "j", Count: 7, Parts: []schema.Part{{K: "a", On: true}, {K: "b"}}, Pod: schema.Pod{X: -3}, Owner: "o"},
		3: full,
	}
	for l := range 4 {
		got, err := decodeJobOf(write(l), byte(l))
		if err != nil || !reflect.DeepEqual(got, want[l]) {
			t.Errorf("layout %d decodes to %+v (%v), want %+v", l, got, err, want[l])
		}
	}
	b := appendJobOf(&full)
	if string(b) != string(write(3)) {
		t.Fatalf("the current layout encodes as %x, want %x", b, write(3))
	}
	if n, ok := skimCount(b); !ok || n != 7 {
		t.Fatalf("skim read count %d (ok %v), want 7", n, ok)
	}
	// An encoding read in another layout than its own is refused here
	// (the fields do not line up), which is why every encoding is stored
	// with its layout.
	for _, l := range []int{1, 2} {
		if _, err := decodeJobOf(b, byte(l)); !errors.Is(err, errCorrupt) {
			t.Errorf("layout 3's encoding read as layout %d: %v, want errCorrupt", l, err)
		}
	}
	if _, err := decodeJobOf(write(0)[:len(write(0))-2], 0); !errors.Is(err, errCorrupt) {
		t.Errorf("layout 0 cut short: %v, want errCorrupt", err)
	}
}

// TestSkimAgrees checks on every truncation and one-byte change of the
// current layout's encoding that the skimmer accepts exactly what the
// decoder accepts, and reads the same count.
func TestSkimAgrees(t *testing.T) {
	b := appendJobOf(&full)
	check := func(c []byte) {
		got, err := decodeJobOf(c, specLayout)
		n, ok := skimCount(c)
		if ok != (err == nil) || ok && n != got.Count {
			t.Fatalf("%x: decoder %v (count %d), skim ok %v (count %d)", c, err, got.Count, ok, n)
		}
	}
	for i := range b {
		check(b[:i])
		for _, delta := range []byte{1, 255} {
			c := append([]byte(nil), b...)
			c[i] += delta
			check(c)
		}
	}
}
