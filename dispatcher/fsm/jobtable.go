package fsm

import "iter"

// jobTable holds every job (capbox sets included) by number. Numbers are
// dense from 1 (nextJob) and no job is ever removed, so it is indexed by
// number: a lookup is an index, not a hash, and a walk in number order
// needs no sort. It is paged: a table of millions of jobs never copies
// them.
type jobTable struct {
	byNum paged[*job] // job num is *byNum.at(num); num 0 is always nil
	n     int
}

// get returns job num, or nil.
func (t *jobTable) get(num uint64) *job {
	if num < uint64(t.byNum.len()) {
		return *t.byNum.at(int(num))
	}
	return nil
}

// put adds j under j.num, which must be positive and not beyond the next
// job number (loads check records against it).
func (t *jobTable) put(j *job) {
	if int(j.num) >= t.byNum.len() {
		t.byNum.resize(int(j.num) + 1)
	}
	slot := t.byNum.at(int(j.num))
	if *slot == nil {
		t.n++
	}
	*slot = j
}

// len returns the number of jobs.
func (t *jobTable) len() int { return t.n }

// from yields the jobs numbered num or more, in number order.
func (t *jobTable) from(num uint64) iter.Seq[*job] {
	return func(yield func(*job) bool) {
		for i := max(num, 1); i < uint64(t.byNum.len()); i++ {
			if j := *t.byNum.at(int(i)); j != nil && !yield(j) {
				return
			}
		}
	}
}

// all yields every job in number order.
func (t *jobTable) all() iter.Seq[*job] { return t.from(1) }
