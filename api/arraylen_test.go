package api

import "testing"

// TestArrayLen checks the guess that sizes a JSON array's items: exact on
// well-formed arrays (commas in strings and nested values do not count),
// bounded by the body's size and MaxItemsPerRequest on anything.
func TestArrayLen(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int
	}{
		{`[]`, 1},
		{`[{}]`, 1},
		{`[{},{}]`, 2},
		{`[{"a":[1,2,3],"b":{"c":1,"d":2}},{"e":"x,y"}]`, 2},
		{`[{"a":"\",\\"},{},{}]`, 3},
		{`[,,,,,,,,,]`, 4}, // malformed: bounded by the body's size (11 bytes / 3 + 1)
		{`[{"a":"unclosed,]`, 1},
	} {
		if got := arrayLen([]byte(tc.body)); got != tc.want {
			t.Errorf("arrayLen(%s) = %d, want %d", tc.body, got, tc.want)
		}
	}
	big := make([]byte, 0, 3*MaxItemsPerRequest+20)
	big = append(big, '[')
	for range MaxItemsPerRequest + 5 {
		big = append(big, '{', '}', ',')
	}
	big = append(big, '{', '}', ']')
	if got := arrayLen(big); got != MaxItemsPerRequest {
		t.Errorf("arrayLen of %d elements = %d, want the cap %d", MaxItemsPerRequest+6, got, MaxItemsPerRequest)
	}
}
