package api

import "testing"

// TestItemsGuess checks the guess that sizes a JSON array's items after the
// first: exact for items alike, bounded by the rest's size and
// MaxItemsPerRequest on anything.
func TestItemsGuess(t *testing.T) {
	for _, tc := range []struct {
		rest, size, want int
	}{
		{0, 2, 0},       // "[{}]": nothing after the first
		{4 * 21, 20, 4}, // four more items of 20 bytes and a comma each
		{100, 0, 33},    // an empty first item: bounded by the rest's size
		{10 * MaxItemsPerRequest, 2, MaxItemsPerRequest - 1},
	} {
		if got := itemsGuess(tc.rest, tc.size); got != tc.want {
			t.Errorf("itemsGuess(%d, %d) = %d, want %d", tc.rest, tc.size, got, tc.want)
		}
	}
}
