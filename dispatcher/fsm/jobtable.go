package fsm

import "iter"

// jobTable holds every job (capbox sets included) by number. Numbers are
// dense from 1 (nextJob), so it is indexed by number: a lookup is an
// index, not a hash, and a walk in number order needs no sort. It is in
// pages of pageLen numbers: a table of millions of jobs never copies them,
// and a page whose jobs were all forgotten (ForgetJobs) is freed, so the
// table's memory follows the jobs kept, not every job ever submitted.
type jobTable struct {
	pages []*jobPage // nil: a page never filled, or emptied
	n     int
}

type jobPage struct {
	jobs [pageLen]*job
	n    int // jobs in jobs
}

// get returns job num, or nil.
func (t *jobTable) get(num uint64) *job {
	if p := num / pageLen; p < uint64(len(t.pages)) && t.pages[p] != nil {
		return t.pages[p].jobs[num%pageLen]
	}
	return nil
}

// put adds j under j.num, which must be positive and not beyond the next
// job number (loads check records against it), or replaces the job there.
func (t *jobTable) put(j *job) {
	p := j.num / pageLen
	for uint64(len(t.pages)) <= p {
		t.pages = append(t.pages, nil)
	}
	if t.pages[p] == nil {
		t.pages[p] = new(jobPage)
	}
	pg := t.pages[p]
	slot := &pg.jobs[j.num%pageLen]
	if *slot == nil {
		pg.n++
		t.n++
	}
	*slot = j
}

// remove drops job num, if there is one, freeing its page once it holds
// no job.
func (t *jobTable) remove(num uint64) {
	p := num / pageLen
	if p >= uint64(len(t.pages)) || t.pages[p] == nil || t.pages[p].jobs[num%pageLen] == nil {
		return
	}
	pg := t.pages[p]
	pg.jobs[num%pageLen] = nil
	pg.n--
	t.n--
	if pg.n == 0 {
		t.pages[p] = nil
	}
}

// len returns the number of jobs.
func (t *jobTable) len() int { return t.n }

// from yields the jobs numbered num or more, in number order.
func (t *jobTable) from(num uint64) iter.Seq[*job] {
	return func(yield func(*job) bool) {
		for p := num / pageLen; p < uint64(len(t.pages)); p++ {
			pg := t.pages[p]
			if pg == nil {
				continue
			}
			start := uint64(0)
			if p == num/pageLen {
				start = num % pageLen
			}
			for _, j := range pg.jobs[start:] {
				if j != nil && !yield(j) {
					return
				}
			}
		}
	}
}

// all yields every job in number order.
func (t *jobTable) all() iter.Seq[*job] { return t.from(1) }
