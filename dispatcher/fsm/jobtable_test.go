package fsm

import (
	"slices"
	"testing"
)

// TestJobTablePages checks lookups and walks across the table's pages:
// every job put is found under its number, and a walk from any number
// yields exactly the jobs at or after it, in order, stopping when told.
func TestJobTablePages(t *testing.T) {
	var tab jobTable
	var nums []uint64
	for num := uint64(1); num < 3*pageLen+10; num += 7 {
		tab.put(&job{num: num})
		nums = append(nums, num)
	}
	tab.put(&job{num: nums[3]}) // again: replaced, not counted twice
	if tab.len() != len(nums) {
		t.Fatalf("len %d, want %d", tab.len(), len(nums))
	}
	for _, num := range nums {
		if j := tab.get(num); j == nil || j.num != num {
			t.Fatalf("get(%d) = %v", num, j)
		}
	}
	for _, num := range []uint64{0, 2, 3 * pageLen, 10 * pageLen} {
		if j := tab.get(num); j != nil {
			t.Errorf("get(%d) = job %d, want none", num, j.num)
		}
	}
	for _, from := range []uint64{0, 1, 2, pageLen - 1, pageLen, pageLen + 1, 2*pageLen + 3, 3*pageLen + 9, 5 * pageLen} {
		var got []uint64
		for j := range tab.from(from) {
			got = append(got, j.num)
		}
		i, _ := slices.BinarySearch(nums, from)
		if want := nums[i:]; !slices.Equal(got, want) {
			t.Fatalf("from(%d): %d jobs, want %d", from, len(got), len(want))
		}
	}
	var first []uint64
	for j := range tab.all() {
		if first = append(first, j.num); len(first) == 3 {
			break
		}
	}
	if !slices.Equal(first, nums[:3]) {
		t.Fatalf("all, stopped after three: %v, want %v", first, nums[:3])
	}
}

// TestJobTableRemove removes jobs across pages: a removed job is not
// found or walked, the count follows, a page is freed once empty, and a
// job put again on a freed page is found.
func TestJobTableRemove(t *testing.T) {
	var tab jobTable
	for num := uint64(1); num < 2*pageLen; num++ {
		tab.put(&job{num: num})
	}
	for num := uint64(1); num < pageLen+5; num++ {
		tab.remove(num)
	}
	tab.remove(pageLen + 1) // again: nothing
	tab.remove(10 * pageLen)
	if want := 2*pageLen - 1 - (pageLen + 4); tab.len() != want {
		t.Fatalf("len %d, want %d", tab.len(), want)
	}
	if tab.pages[0] != nil {
		t.Fatal("page 0 kept with no job")
	}
	if j := tab.get(pageLen + 4); j != nil {
		t.Fatalf("removed job %d found", j.num)
	}
	for j := range tab.all() {
		if j.num != pageLen+5 {
			t.Fatalf("first job walked is %d, want %d", j.num, pageLen+5)
		}
		break
	}
	tab.put(&job{num: 3})
	if j := tab.get(3); j == nil || j.num != 3 {
		t.Fatalf("job put on a freed page: get(3) = %v", j)
	}
}
