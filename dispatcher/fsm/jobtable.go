package fsm

import "iter"

// jobTable holds every job (capbox sets included) by number. Numbers are
// dense from 1 (nextJob) and no job is ever removed, so it is a slice
// indexed by number: a lookup is an index, not a hash, and a walk in
// number order needs no sort.
type jobTable struct {
	byNum []*job // byNum[num]; byNum[0] is always nil
	n     int
}

// get returns job num, or nil.
func (t *jobTable) get(num uint64) *job {
	if num >= uint64(len(t.byNum)) {
		return nil
	}
	return t.byNum[num]
}

// put adds j under j.num, which must be positive and not beyond the next
// job number (loads check records against it).
func (t *jobTable) put(j *job) {
	for uint64(len(t.byNum)) <= j.num {
		t.byNum = append(t.byNum, nil)
	}
	if t.byNum[j.num] == nil {
		t.n++
	}
	t.byNum[j.num] = j
}

// len returns the number of jobs.
func (t *jobTable) len() int { return t.n }

// from yields the jobs numbered num or more, in number order.
func (t *jobTable) from(num uint64) iter.Seq[*job] {
	return func(yield func(*job) bool) {
		for i := max(num, 1); i < uint64(len(t.byNum)); i++ {
			if j := t.byNum[i]; j != nil && !yield(j) {
				return
			}
		}
	}
}

// all yields every job in number order.
func (t *jobTable) all() iter.Seq[*job] { return t.from(1) }
