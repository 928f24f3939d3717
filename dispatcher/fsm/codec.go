package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"
)

// ErrCorrupt is wrapped by every error about a command or stored record that
// does not decode. A corrupt command is rejected whole.
var ErrCorrupt = errors.New("fsm: corrupt command or record")

// enc appends the primitive fields of commands and records.
type enc struct{ b []byte }

func (e *enc) byte(v byte)      { e.b = append(e.b, v) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) bytes(p []byte)   { e.uvarint(uint64(len(p))); e.b = append(e.b, p...) }

// repeatStr writes s, which follows last in a run of strings that often
// repeat (the nodes of a batch of reports): a 0 when it is last again,
// else its length plus one and its bytes.
func (e *enc) repeatStr(s, last string) {
	if s == last {
		e.byte(0)
		return
	}
	e.uvarint(uint64(len(s)) + 1)
	e.b = append(e.b, s...)
}
func (e *enc) bool(v bool) {
	if v {
		e.byte(1)
	} else {
		e.byte(0)
	}
}

// dec reads what enc wrote. The first error sticks; later reads return zero
// values, so a decoder checks err once at the end.
type dec struct {
	b   []byte
	err error
	// src, when set (by sharedDec), holds the bytes b is a suffix of, as a
	// string: str returns substrings of it instead of allocating each.
	src string
}

// sharedDec returns a dec reading b whose strings share one copy of b: one
// allocation for all of them, kept alive as long as any of them is.
func sharedDec(b []byte) dec { return dec{b: b, src: string(b)} }

// viewDec returns a dec reading b whose strings alias b itself: no copy,
// and valid only while b is unchanged. It is for what one command's apply
// reads and drops; a string kept past the apply must be cloned.
func viewDec(b []byte) dec { return dec{b: b, src: unsafe.String(unsafe.SliceData(b), len(b))} }

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or malformed %s", ErrCorrupt, what)
	}
}

func (d *dec) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// uvarint and varint read a one-byte value (lengths, counts, small
// numbers) themselves, and call the general decoder for the rest.
func (d *dec) uvarint() uint64 {
	if len(d.b) > 0 && d.b[0] < 0x80 && d.err == nil {
		v := d.b[0]
		d.b = d.b[1:]
		return uint64(v)
	}
	return d.uvarintSlow()
}

func (d *dec) varint() int64 {
	if len(d.b) > 0 && d.b[0] < 0x80 && d.err == nil {
		u := d.b[0]
		d.b = d.b[1:]
		v := int64(u >> 1)
		if u&1 != 0 {
			v = ^v
		}
		return v
	}
	return d.varintSlow()
}

func (d *dec) uvarintSlow() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varintSlow() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) bytes() []byte { return d.take(d.uvarint()) }

// take reads the next n bytes.
func (d *dec) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length-prefixed field")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) str() string { return d.view(d.bytes()) }

// view returns v, the bytes just read, as a string: a substring of d's
// string copy when it has one.
func (d *dec) view(v []byte) string {
	if d.src == "" || len(v) == 0 {
		return string(v)
	}
	end := len(d.src) - len(d.b)
	return d.src[end-len(v) : end]
}

// repeatStr reads what enc.repeatStr wrote: last again, or a new string.
func (d *dec) repeatStr(last string) string {
	n := d.uvarint()
	if n == 0 || d.err != nil {
		return last
	}
	return d.view(d.take(n - 1))
}

// sub reads a length-prefixed field and returns a dec over it that shares
// d's string copy, if d has one.
func (d *dec) sub() dec {
	v := d.bytes()
	s := dec{b: v, err: d.err}
	if d.src != "" && len(v) > 0 {
		end := len(d.src) - len(d.b)
		s.src = d.src[end-len(v) : end]
	}
	return s
}

// stringDec returns a dec over s whose strings are substrings of s. A dec
// only reads its bytes, so it may read s's.
func stringDec(s string) dec {
	return dec{b: unsafe.Slice(unsafe.StringData(s), len(s)), src: s}
}

// ownedDec returns a dec over b whose strings are substrings of b, which
// nothing may write to again.
func ownedDec(b []byte) dec {
	return dec{b: b, src: unsafe.String(unsafe.SliceData(b), len(b))}
}

func (d *dec) bool() bool { return d.byte() != 0 }

// count reads a length that prefixes items of at least min bytes each, and
// rejects one the remaining input cannot hold (so a corrupt count cannot make
// a decoder allocate without bound).
func (d *dec) count(min int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if min < 1 {
		min = 1
	}
	if n > uint64(len(d.b)/min) {
		d.fail("count")
		return 0
	}
	return int(n)
}

// done reports the sticky error, or one for trailing bytes.
func (d *dec) done(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes after %s", ErrCorrupt, len(d.b), what)
	}
	if d.err != nil {
		return fmt.Errorf("%s: %w", what, d.err)
	}
	return nil
}
