package fsm

import "iter"

// pageLen is the elements of one page of a paged.
const pageLen = 4096

// paged is a list of T that grows by fixed pages instead of being
// reallocated and copied whole each time it doubles: the FSM's tables hold
// an entry for every job, millions of them, and a copy would move them all
// (with a write barrier per pointer) and, for a while, hold two.
type paged[T any] struct {
	pages [][]T // every page pageLen long; as many as len needs
	n     int
}

func (p *paged[T]) len() int { return p.n }

// at returns element i, which must be below len.
func (p *paged[T]) at(i int) *T { return &p.pages[uint(i)/pageLen][uint(i)%pageLen] }

// push appends v.
func (p *paged[T]) push(v T) {
	if p.n == len(p.pages)*pageLen {
		p.pages = append(p.pages, make([]T, pageLen))
	}
	p.pages[uint(p.n)/pageLen][uint(p.n)%pageLen] = v
	p.n++
}

// all yields the elements in order.
func (p *paged[T]) all() iter.Seq[T] {
	return func(yield func(T) bool) {
		for i, page := range p.pages {
			for _, v := range page[:min(pageLen, p.n-i*pageLen)] {
				if !yield(v) {
					return
				}
			}
		}
	}
}

// resize sets the length to n: growing adds zero elements; shrinking zeroes
// the elements cut, so that they keep nothing alive, and drops the pages
// left empty.
func (p *paged[T]) resize(n int) {
	if n < p.n {
		for i := n; i < p.n; {
			page, off := p.pages[i/pageLen], i%pageLen
			end := min(pageLen, off+p.n-i)
			clear(page[off:end])
			i += end - off
		}
		keep := (n + pageLen - 1) / pageLen
		clear(p.pages[keep:])
		p.pages = p.pages[:keep]
	}
	for len(p.pages)*pageLen < n {
		p.pages = append(p.pages, make([]T, pageLen))
	}
	p.n = n
}
