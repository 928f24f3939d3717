package api

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/seedtest"
)

// TestParseUTC checks parseUTC against time.Time's UnmarshalText: on
// random UTC times as MarshalText writes them, which it must read to the
// same time, and on those strings with one byte changed and on edge
// cases, where whatever it reads UnmarshalText must read the same.
func TestParseUTC(t *testing.T) {
	r := seedtest.Rand(t)
	cases := []string{
		"2026-12-02T04:00:12Z", "2026-12-02T04:00:12.363Z", "2026-12-02T04:00:12.123456789Z",
		"0000-01-01T00:00:00Z", "0000-02-29T00:00:00Z", "0000-03-01T00:00:00Z", "1969-12-31T23:59:59.999999999Z",
		"1970-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z", "2000-02-29T00:00:00Z", "2024-02-29T00:00:00Z",
		"1900-02-29T00:00:00Z", "2025-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z",
		"2026-00-01T00:00:00Z", "2026-12-00T00:00:00Z", "2026-12-32T00:00:00Z", "2026-12-02T24:00:00Z",
		"2026-12-02T23:60:00Z", "2026-12-02T23:59:60Z", "2026-12-02T04:00:12.Z", "2026-12-02T04:00:12.1234567891Z",
		"2026-12-02T04:00:12,5Z", "2026-12-02T04:00:12z", "2026-12-02 04:00:12Z", "2026-12-02T04:00:12+00:00",
		"2026-12-02T04:00:12.5+01:00", "+026-12-02T04:00:12Z", "2026-1a-02T04:00:12Z", "2026-12-02T04:00:12.12a4Z", "", "Z",
	}
	for range 5000 {
		tm := time.Unix(r.Int64N(253402300800+62167219200)-62167219200, r.Int64N(int64(time.Second))).UTC()
		switch r.IntN(3) {
		case 0:
			tm = tm.Truncate(time.Second)
		case 1:
			tm = tm.Truncate(time.Millisecond)
		}
		b, err := tm.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		got, ok := parseUTC(string(b))
		if !ok || got != tm {
			t.Fatalf("parseUTC(%s) = %v, %v; want %v", b, got, ok, tm)
		}
		b[r.IntN(len(b))] = "0123456789-:.TZ+x"[r.IntN(17)]
		cases = append(cases, string(b))
	}
	read := 0
	for _, s := range cases {
		got, ok := parseUTC(s)
		var want time.Time
		err := want.UnmarshalText([]byte(s))
		if ok && (err != nil || got != want) {
			t.Errorf("parseUTC(%q) = %v; UnmarshalText: %v, %v", s, got, want, err)
		}
		if ok {
			read++
		}
	}
	if read < len(cases)/4 {
		t.Errorf("parseUTC read %d of %d cases: it should read most valid ones", read, len(cases))
	}
}

// BenchmarkParseTime measures reading a report's time: parseUTC beside
// UnmarshalText.
func BenchmarkParseTime(b *testing.B) {
	s := "2026-12-02T04:00:12.363456789Z"
	b.Run("parseUTC", func(b *testing.B) {
		for b.Loop() {
			if _, ok := parseUTC(s); !ok {
				b.Fatal("not read")
			}
		}
	})
	b.Run("UnmarshalText", func(b *testing.B) {
		for b.Loop() {
			var t time.Time
			if err := t.UnmarshalText([]byte(s)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
