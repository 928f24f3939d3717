package api

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"time"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string such as "90s" or "1h30m".
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return appendDuration(nil, d), nil
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("duration: want a string such as \"90s\", got %s", b)
	}
	*d, err = parseDuration(s)
	return err
}

var errQuantity = errors.New("not a quantity")

// cpuUnits maps CPU quantity suffixes to millicores per unit.
var cpuUnits = map[string]uint64{"": 1000, "m": 1}

// byteUnits maps byte quantity suffixes to bytes per unit.
var byteUnits = map[string]uint64{
	"":  1,
	"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50,
}

// ParseCPU parses a CPU quantity into millicores: "500m" is 500, "2" is 2000,
// "0.25" is 250.
func ParseCPU(s string) (int64, error) { return parseQuantity(s, cpuUnits, "millicores") }

// ParseBytes parses a byte quantity: "512Mi", "1.5Gi", "100M", "4096".
func ParseBytes(s string) (int64, error) { return parseQuantity(s, byteUnits, "bytes") }

// parseQuantity parses a non-negative decimal with an optional unit suffix and
// returns the whole number of base units it denotes, refusing fractions of a
// base unit and values beyond int64.
func parseQuantity(s string, units map[string]uint64, base string) (int64, error) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, suffix := s[:i], s[i:]
	mult, ok := units[suffix]
	if !ok || num == "" {
		return 0, fmt.Errorf("%w: %q (want a number with an optional unit)", errQuantity, s)
	}
	var mant uint64
	scale := uint64(1)
	seenDot, digits := false, 0
	for j := 0; j < len(num); j++ {
		c := num[j]
		if c == '.' {
			if seenDot {
				return 0, fmt.Errorf("%w: %q", errQuantity, s)
			}
			seenDot = true
			continue
		}
		digits++
		hi, lo := bits.Mul64(mant, 10)
		lo, carry := bits.Add64(lo, uint64(c-'0'), 0)
		if hi != 0 || carry != 0 || (seenDot && scale >= 1e18) {
			return 0, fmt.Errorf("%w: %q is too long", errQuantity, s)
		}
		mant = lo
		if seenDot {
			scale *= 10
		}
	}
	if digits == 0 {
		return 0, fmt.Errorf("%w: %q", errQuantity, s)
	}
	hi, lo := bits.Mul64(mant, mult)
	if hi >= scale {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	q, r := bits.Div64(hi, lo, scale)
	if r != 0 {
		return 0, fmt.Errorf("%q is not a whole number of %s", s, base)
	}
	if q > 1<<63-1 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return int64(q), nil
}

// parseDuration parses a Go duration string and refuses negative ones.
func parseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want a number with a unit, such as \"90s\" or \"1h30m\")", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return Duration(v), nil
}
