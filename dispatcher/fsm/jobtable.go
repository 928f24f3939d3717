package fsm

import "iter"

// jobTable holds every job (capbox sets included) by number. Numbers are
// dense from 1 (nextJob) and no job is ever removed, so it is indexed by
// number: a lookup is an index, not a hash, and a walk in number order
// needs no sort. It grows by fixed pages rather than by one slice
// reallocated and copied (with a write barrier per pointer) each time it
// doubles: a table of millions of jobs never copies them, nor holds two
// copies at once.
type jobTable struct {
	pages [][]*job // job num is pages[num/jobPage][num%jobPage]; num 0 is always nil
	n     int
}

// jobPage is the jobs of one page of a jobTable.
const jobPage = 4096

// get returns job num, or nil.
func (t *jobTable) get(num uint64) *job {
	if p := num / jobPage; p < uint64(len(t.pages)) {
		return t.pages[p][num%jobPage]
	}
	return nil
}

// put adds j under j.num, which must be positive and not beyond the next
// job number (loads check records against it).
func (t *jobTable) put(j *job) {
	for uint64(len(t.pages)) <= j.num/jobPage {
		t.pages = append(t.pages, make([]*job, jobPage))
	}
	slot := &t.pages[j.num/jobPage][j.num%jobPage]
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
		num = max(num, 1)
		for p := num / jobPage; p < uint64(len(t.pages)); p++ {
			page := t.pages[p]
			if p == num/jobPage {
				page = page[num%jobPage:]
			}
			for _, j := range page {
				if j != nil && !yield(j) {
					return
				}
			}
		}
	}
}

// all yields every job in number order.
func (t *jobTable) all() iter.Seq[*job] { return t.from(1) }
