package layouttest

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/codecgen/layouttest/schema"
)

// errCorrupt is what every decoding error wraps.
var errCorrupt = errors.New("layouttest: corrupt")

type enc struct{ b []byte }

func (e *enc) byte(v byte)      { e.b = append(e.b, v) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) bool(v bool)      { e.byte(map[bool]byte{false: 0, true: 1}[v]) }
func appendJobOf(v *schema.Job) []byte {
	var e enc
	appendJob(&e, v)
	return e.b
}

// dec reads what enc wrote; the first error sticks.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errCorrupt, what)
	}
	d.b = nil
}

func (d *dec) byte() byte {
	if len(d.b) == 0 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("string")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// count reads a count of items of at least min bytes each.
func (d *dec) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail("count")
		return 0
	}
	return int(n)
}

func decodeBool(d *dec) bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bool")
	return false
}

// specDecoder decodes encodings of one layout.
type specDecoder struct{ layout byte }

// decodePodLegacy decodes layout 0's pod: a flags byte, then X when bit 0
// is set.
func (sd *specDecoder) decodePodLegacy(d *dec, v *schema.Pod) {
	switch d.byte() {
	case 0:
	case 1:
		v.X = d.varint()
	default:
		d.fail("pod flags")
	}
}

// decodeJobOf decodes b, a job of layout l, all of it.
func decodeJobOf(b []byte, l byte) (schema.Job, error) {
	sd := specDecoder{layout: l}
	d := dec{b: b}
	var v schema.Job
	sd.decodeJob(&d, &v)
	if d.err == nil && len(d.b) > 0 {
		d.fail("trailing bytes")
	}
	return v, d.err
}

// The skim's primitives: each reads at s[i:] and returns the index after
// it, -1 for malformed (and given -1).

func readUvarint(s string, i int) (uint64, int) {
	if i < 0 || i > len(s) {
		return 0, -1
	}
	v, n := binary.Uvarint([]byte(s[i:]))
	if n <= 0 {
		return 0, -1
	}
	return v, i + n
}

func readVarint(s string, i int) (int64, int) {
	u, i := readUvarint(s, i)
	return int64(u>>1) ^ -int64(u&1), i
}

func readBool(s string, i int) (bool, int) {
	if i < 0 || i >= len(s) || s[i] > 1 {
		return false, -1
	}
	return s[i] == 1, i + 1
}

func readCount(s string, i, min int) (int, int) {
	n, i := readUvarint(s, i)
	if i < 0 || n > uint64((len(s)-i)/min) {
		return 0, -1
	}
	return int(n), i
}

func skipStr(s string, i int) int {
	n, i := readUvarint(s, i)
	if i < 0 || n > uint64(len(s)-i) {
		return -1
	}
	return i + int(n)
}

// skimmer takes a job's count.
type skimmer struct{ count int64 }

func (k *skimmer) skimJobCount(s string, i int) int {
	k.count, i = readVarint(s, i)
	return i
}

// skimCount reads a job of the current layout for its count; ok is false
// for an encoding the decoder refuses.
func skimCount(b []byte) (count int64, ok bool) {
	var k skimmer
	i := skimJob(string(b), 0, &k)
	return k.count, i == len(b)
}
