package api

import (
	"fmt"
	"math"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// plain marks the bytes a JSON string holds as they are: ASCII other than
// control characters, '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// maxDepth bounds the nesting of JSON values the decoder will skip over.
const maxDepth = 64

// decoder reads JSON strictly and without reflection: unknown fields,
// duplicate keys, wrong types and out-of-range numbers become problems at
// their path, and decoding goes on past them; broken syntax stops it.
//
// The methods that read an object or array push a path segment that follows
// the member or element being read, so that a problem anywhere is named by
// its full path.
type decoder struct {
	checker
	// text is one copy of the input as a string; decoded strings without
	// escapes are substrings of it, so reading them allocates nothing.
	text string
	pos  int
	// broken is set by the first syntax error; every read then returns at
	// once so that decoding unwinds.
	broken bool
	// lenient skips unknown members instead of reporting them: for replies,
	// which a newer server may extend.
	lenient bool
	scratch []byte
	// lastNum is where the last number read began, for messages.
	lastNum int
	// lastPod is the last spec targetPod read.
	lastPod podMemo
	// The current member's name is input[keyStart:keyEnd], or scratch when
	// it had escapes (until the next string is read).
	keyStart, keyEnd int
	keyEscaped       bool
	// Slabs for the slices of one request's items. They are dropped after
	// each request, since the items returned keep them, unless a JobArena
	// lent them.
	groups     slab[TaskGroupSpec]
	containers slab[ContainerSpec]
	strings    slab[string]
}

// maxSlabChunk is the most elements a slab allocates at a time.
const maxSlabChunk = 128

// minSlabChunk is the fewest elements a slab allocates at a time.
const minSlabChunk = 4

// slab hands out short slices carved from larger allocations, so that the
// many small slices of a bulk request (one task group, one container, a
// two-element command) cost one allocation per chunk instead of one each.
type slab[T any] struct {
	free  []T
	chunk int // elements per allocation, sized to the request (at most)
	made  int // elements allocated, when not reusing
	// reuse keeps every chunk in chunks, to hand out again after a rewind:
	// chunks[:next] are in use.
	reuse  bool
	chunks [][]T
	next   int
}

func newSlab[T any](chunk int) slab[T] { return slab[T]{chunk: chunk} }

// rewind readies a reusing slab for the next request, with chunks of
// chunk elements: the slices it handed out before will be handed out
// again.
func (s *slab[T]) rewind(chunk int) {
	s.free, s.chunk, s.reuse, s.next = nil, chunk, true, 0
}

// take returns a zeroed slice of length and capacity n; appending to it
// reallocates, so it never overwrites a neighbour.
func (s *slab[T]) take(n int) []T {
	if n > len(s.free) {
		if n > s.chunk/4 {
			return make([]T, n)
		}
		s.free = s.newChunk(n)
	}
	out := s.free[:n:n]
	s.free = s.free[n:]
	return out
}

// newChunk returns a zeroed chunk of at least need elements: a new one,
// or when reusing, the next kept one if it is large enough. New chunks
// that are not kept start at a quarter of chunk and double up to it: chunk
// is a guess from the request's size, and a node's target, whose pods
// mostly share a spec, needs few containers for its size.
func (s *slab[T]) newChunk(need int) []T {
	if !s.reuse {
		n := min(s.chunk, max(need, s.chunk/4, minSlabChunk, s.made))
		s.made += n
		return make([]T, n)
	}
	if s.next < len(s.chunks) && len(s.chunks[s.next]) >= s.chunk {
		c := s.chunks[s.next]
		clear(c)
		s.next++
		return c
	}
	c := make([]T, s.chunk)
	if s.next < len(s.chunks) {
		s.chunks[s.next] = c
	} else {
		s.chunks = append(s.chunks, c)
	}
	s.next++
	return c
}

// grow appends one zero element to list, taking the first from the slab.
func grow[T any](list []T, s *slab[T]) []T {
	if list == nil {
		return s.take(1)
	}
	var zero T
	return append(list, zero)
}

func (d *decoder) syntax(format string, args ...any) {
	if d.broken {
		return
	}
	d.broken = true
	line, col := 1, 1
	end := min(d.pos, len(d.input))
	for _, c := range d.input[:end] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	d.addf("invalid JSON at line %d, column %d: %s", line, col, fmt.Sprintf(format, args...))
}

func (d *decoder) skipWS() {
	for d.pos < len(d.input) {
		switch d.input[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end of the input.
func (d *decoder) peek() byte {
	d.skipWS()
	if d.pos < len(d.input) {
		return d.input[d.pos]
	}
	return 0
}

// kind names the JSON type of a value starting with c, for messages; a
// byte no JSON value starts with is named as what it is.
func kind(c byte) string {
	switch {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't', c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == 0:
		return "the end of the input"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	case c == 0xEF:
		return "the byte 0xEF (a UTF-8 byte-order mark starts with it: send JSON without one)"
	case c < 0x20 || c >= 0x7F:
		return fmt.Sprintf("the byte 0x%02X, which starts no JSON value", c)
	}
	return fmt.Sprintf("%q, which starts no JSON value", rune(c))
}

// want checks that the next value starts with c; if it is something else it
// records that and skips it. It returns false for null and mismatches, which
// callers treat as an absent value.
func (d *decoder) want(c byte, what string) bool {
	got := d.peek()
	if got == c {
		return true
	}
	d.skipValue()
	if got != 'n' && !d.broken {
		d.addf("want %s, got %s", what, kind(got))
	}
	return false
}

// openObject starts reading an object; members follow with nextMember.
func (d *decoder) openObject() bool {
	if !d.want('{', "an object") {
		return false
	}
	d.pos++
	d.path = append(d.path, seg{kind: segRange})
	return true
}

// nextMember moves to the object's next member and reads its key, or reads
// the closing brace and returns false. The key is d.key() until the next call.
func (d *decoder) nextMember() bool {
	top := &d.path[len(d.path)-1]
	first := top.index == 0
	c := d.peek()
	if d.broken {
		d.pop()
		return false
	}
	if c == '}' {
		d.pos++
		d.pop()
		return false
	}
	if !first {
		if c != ',' {
			d.syntax("want ',' or '}' after object member, got %s", quoteByte(c))
			d.pop()
			return false
		}
		d.pos++
		c = d.peek()
	}
	if c != '"' {
		d.syntax("want a member name in quotes, got %s", quoteByte(c))
		d.pop()
		return false
	}
	start, end, escaped := d.scanString()
	if d.broken {
		d.pop()
		return false
	}
	top.kind, top.start, top.end = segRange, int32(start), int32(end)
	top.index++
	d.keyStart, d.keyEnd, d.keyEscaped = start, end, escaped
	if escaped {
		top.kind, top.name = segName, string(d.scratch)
	}
	if d.peek() != ':' {
		d.syntax("want ':' after member name, got %s", quoteByte(d.peek()))
		d.pop()
		return false
	}
	d.pos++
	return true
}

// key returns the current member's name.
func (d *decoder) key() []byte {
	if d.keyEscaped {
		return d.scratch
	}
	return d.input[d.keyStart:d.keyEnd]
}

// field reports whether the member with bit is new in seen; a repeated member
// is a problem and its value is skipped.
func (d *decoder) field(seen *uint64, bit uint) bool {
	if *seen&(1<<bit) != 0 {
		d.add("duplicate field")
		d.skipValue()
		return false
	}
	*seen |= 1 << bit
	return true
}

// unknown reports the current member as not a field of the object.
func (d *decoder) unknown() {
	if !d.lenient {
		d.add("unknown field")
	}
	d.skipValue()
}

// openArray starts reading an array; elements follow with nextElem.
func (d *decoder) openArray() bool {
	if !d.want('[', "an array") {
		return false
	}
	d.pos++
	d.path = append(d.path, seg{kind: segIndex, index: -1})
	return true
}

// nextElem moves to the array's next element, or reads the closing bracket
// and returns false.
func (d *decoder) nextElem() bool {
	top := &d.path[len(d.path)-1]
	c := d.peek()
	if d.broken {
		d.pop()
		return false
	}
	if c == ']' {
		d.pos++
		d.pop()
		return false
	}
	if top.index >= 0 {
		if c != ',' {
			d.syntax("want ',' or ']' after array element, got %s", quoteByte(c))
			d.pop()
			return false
		}
		d.pos++
		if d.peek() == ']' {
			d.syntax("want a value after ',', got ']'")
			d.pop()
			return false
		}
	}
	top.index++
	return true
}

// str reads a string value.
func (d *decoder) str() string {
	if !d.want('"', "a string") {
		return ""
	}
	start, end, escaped := d.scanString()
	if d.broken {
		return ""
	}
	if escaped {
		return string(d.scratch)
	}
	return d.text[start:end]
}

// strs reads an array of strings.
func (d *decoder) strs() []string {
	if !d.openArray() {
		return nil
	}
	var buf [8]string
	out := buf[:0]
	for d.nextElem() {
		out = append(out, d.str())
	}
	if len(out) == 0 {
		return nil
	}
	return append(d.strings.take(len(out))[:0], out...)
}

// strMap reads an object of string values.
func (d *decoder) strMap() map[string]string {
	if !d.openObject() {
		return nil
	}
	m := map[string]string{}
	for d.nextMember() {
		k := string(d.key())
		top := &d.path[len(d.path)-1]
		top.kind, top.name = segKey, k
		v := d.str()
		if _, dup := m[k]; dup {
			d.add("duplicate key")
			continue
		}
		m[k] = v
	}
	return m
}

func (d *decoder) boolean() bool {
	switch d.peek() {
	case 't':
		return d.literal("true")
	case 'f':
		d.literal("false")
		return false
	}
	d.want('t', "a boolean")
	return false
}

func (d *decoder) literal(lit string) bool {
	if len(d.input)-d.pos < len(lit) || string(d.input[d.pos:d.pos+len(lit)]) != lit {
		d.syntax("invalid literal, want %s", lit)
		return false
	}
	d.pos += len(lit)
	return true
}

// intIn reads an integer in [lo, hi].
func (d *decoder) intIn(lo, hi int64) int64 {
	c := d.peek()
	if c != '-' && (c < '0' || c > '9') {
		d.want('0', "an integer")
		return 0
	}
	v, whole, ok := d.number()
	switch {
	case d.broken:
	case !whole:
		d.add("want an integer, got a fraction or exponent")
	case !ok || v < lo || v > hi:
		d.addf("%s is out of range", d.input[d.lastNum:d.pos])
	default:
		return v
	}
	return 0
}

// int32 reads an integer that fits in 32 bits; the validator checks the
// range the field allows.
func (d *decoder) int32() int32 { return int32(d.intIn(math.MinInt32, math.MaxInt32)) }

// quantity reads an integer, or a string parsed by parse.
func (d *decoder) quantity(parse func(string) (int64, error)) int64 {
	if d.peek() != '"' {
		return d.int64()
	}
	s := d.str()
	if d.broken {
		return 0
	}
	v, err := parse(s)
	if err != nil {
		d.add(err.Error())
		return 0
	}
	return v
}

// duration reads a Go duration string.
func (d *decoder) duration() Duration {
	s := d.str()
	if s == "" {
		return 0
	}
	v, err := parseDuration(s)
	if err != nil {
		d.add(err.Error())
		return 0
	}
	return v
}

// number scans a JSON number. It returns its value when it is an integer
// that fits in int64: whole is false for a fraction or exponent, ok false
// for an integer out of range.
func (d *decoder) number() (v int64, whole, ok bool) {
	start := d.pos
	d.lastNum = start
	neg := false
	if d.input[d.pos] == '-' {
		neg = true
		d.pos++
	}
	digits := d.pos
	var u uint64
	ok = true
	for d.pos < len(d.input) && d.input[d.pos] >= '0' && d.input[d.pos] <= '9' {
		dig := uint64(d.input[d.pos] - '0')
		if u > (math.MaxUint64-dig)/10 {
			ok = false
		}
		u = u*10 + dig
		d.pos++
	}
	switch n := d.pos - digits; {
	case n == 0:
		d.syntax("invalid number")
		return 0, false, false
	case n > 1 && d.input[digits] == '0':
		d.syntax("invalid number: leading zero")
		return 0, false, false
	}
	whole = true
	if d.pos < len(d.input) && d.input[d.pos] == '.' {
		whole = false
		d.pos++
		if !d.digits() {
			d.syntax("invalid number: want digits after '.'")
			return 0, false, false
		}
	}
	if d.pos < len(d.input) && (d.input[d.pos] == 'e' || d.input[d.pos] == 'E') {
		whole = false
		d.pos++
		if d.pos < len(d.input) && (d.input[d.pos] == '+' || d.input[d.pos] == '-') {
			d.pos++
		}
		if !d.digits() {
			d.syntax("invalid number: want digits in exponent")
			return 0, false, false
		}
	}
	switch {
	case !ok:
	case neg && u <= 1<<63:
		v = -int64(u-1) - 1
	case !neg && u <= math.MaxInt64:
		v = int64(u)
	default:
		ok = false
	}
	return v, whole, ok
}

func (d *decoder) digits() bool {
	start := d.pos
	for d.pos < len(d.input) && d.input[d.pos] >= '0' && d.input[d.pos] <= '9' {
		d.pos++
	}
	return d.pos > start
}

// scanString reads a string starting at its opening quote. Without escapes
// the string is input[start:end]; with them it is decoded into d.scratch.
func (d *decoder) scanString() (start, end int, escaped bool) {
	d.pos++
	start = d.pos
	in := d.input
	for i := d.pos; i < len(in); {
		c := in[i]
		if plain[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			d.pos = i + 1
			return start, i, false
		case c == '\\':
			d.scratch = append(d.scratch[:0], in[start:i]...)
			d.pos = i
			return start, 0, d.unescape()
		case c < 0x20:
			d.pos = i
			d.syntax("control character %s in string", quoteByte(c))
			return 0, 0, false
		default:
			r, n := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && n == 1 {
				d.pos = i
				d.syntax("invalid UTF-8 in string")
				return 0, 0, false
			}
			i += n
		}
	}
	d.pos = len(in)
	d.syntax("unterminated string")
	return 0, 0, false
}

// unescape continues a string at its first backslash, appending the decoded
// text to d.scratch. It reports whether the string was read whole.
func (d *decoder) unescape() bool {
	in := d.input
	for d.pos < len(in) {
		c := in[d.pos]
		switch {
		case c == '"':
			d.pos++
			return true
		case c < 0x20:
			d.syntax("control character %s in string", quoteByte(c))
			return false
		case c == '\\':
			if d.pos+1 >= len(in) {
				d.pos = len(in)
				d.syntax("unterminated string")
				return false
			}
			d.pos += 2
			switch e := in[d.pos-1]; e {
			case '"', '\\', '/':
				d.scratch = append(d.scratch, e)
			case 'b':
				d.scratch = append(d.scratch, '\b')
			case 'f':
				d.scratch = append(d.scratch, '\f')
			case 'n':
				d.scratch = append(d.scratch, '\n')
			case 'r':
				d.scratch = append(d.scratch, '\r')
			case 't':
				d.scratch = append(d.scratch, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return false
				}
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if d.pos+1 < len(in) && in[d.pos] == '\\' && in[d.pos+1] == 'u' {
						d.pos += 2
						if r2, ok = d.hex4(); !ok {
							return false
						}
					}
					if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
						d.syntax("invalid surrogate pair in \\u escape")
						return false
					}
				}
				d.scratch = utf8.AppendRune(d.scratch, r)
			default:
				d.pos--
				d.syntax("invalid escape '\\%c' in string", e)
				return false
			}
		case c < utf8.RuneSelf:
			d.scratch = append(d.scratch, c)
			d.pos++
		default:
			r, n := utf8.DecodeRune(in[d.pos:])
			if r == utf8.RuneError && n == 1 {
				d.syntax("invalid UTF-8 in string")
				return false
			}
			d.scratch = append(d.scratch, in[d.pos:d.pos+n]...)
			d.pos += n
		}
	}
	d.syntax("unterminated string")
	return false
}

func (d *decoder) hex4() (rune, bool) {
	if len(d.input)-d.pos < 4 {
		d.syntax("invalid \\u escape")
		return 0, false
	}
	var r rune
	for _, c := range d.input[d.pos : d.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			d.syntax("invalid \\u escape")
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	d.pos += 4
	return r, true
}

// skipValue skips over one value of any type, checking its syntax.
func (d *decoder) skipValue() { d.skip(0) }

func (d *decoder) skip(depth int) {
	if depth > maxDepth {
		d.syntax("nesting deeper than %d", maxDepth)
		return
	}
	switch c := d.peek(); c {
	case '{':
		d.pos++
		for first := true; !d.broken; first = false {
			c := d.peek()
			if c == '}' {
				d.pos++
				return
			}
			if !first {
				if c != ',' {
					d.syntax("want ',' or '}' after object member, got %s", quoteByte(c))
					return
				}
				d.pos++
			}
			if d.peek() != '"' {
				d.syntax("want a member name in quotes, got %s", quoteByte(d.peek()))
				return
			}
			d.scanString()
			if d.peek() != ':' && !d.broken {
				d.syntax("want ':' after member name, got %s", quoteByte(d.peek()))
				return
			}
			d.pos++
			d.skip(depth + 1)
		}
	case '[':
		d.pos++
		for first := true; !d.broken; first = false {
			c := d.peek()
			if c == ']' && first {
				d.pos++
				return
			}
			if !first {
				if c == ']' {
					d.pos++
					return
				}
				if c != ',' {
					d.syntax("want ',' or ']' after array element, got %s", quoteByte(c))
					return
				}
				d.pos++
			}
			d.skip(depth + 1)
		}
	case '"':
		d.scanString()
	case 't':
		d.literal("true")
	case 'f':
		d.literal("false")
	case 'n':
		d.literal("null")
	case 0:
		d.syntax("unexpected end of input")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			d.number()
			return
		}
		d.syntax("unexpected %s", quoteByte(c))
	}
}

func quoteByte(c byte) string {
	if c == 0 {
		return "end of input"
	}
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("'%c'", c)
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// int64 reads an integer; the validator checks the range the field allows.
func (d *decoder) int64() int64 { return d.intIn(math.MinInt64, math.MaxInt64) }

// time reads an RFC 3339 time string as encoding/json reads a time.Time;
// null leaves it zero.
func (d *decoder) time() time.Time {
	if d.peek() == 'n' {
		d.skipValue()
		return time.Time{}
	}
	var t time.Time
	s := d.str()
	if d.broken {
		return t
	}
	if t, ok := parseUTC(s); ok {
		return t
	}
	if err := t.UnmarshalText([]byte(s)); err != nil {
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		d.addf("want an RFC 3339 time, got %q", s)
		return time.Time{}
	}
	return t
}

// parseUTC reads s when it is a UTC time as time.Time's MarshalText writes
// one (2006-01-02T15:04:05Z, with '.' and one to nine fraction digits
// before the Z when it has them), to the same time as UnmarshalText, in
// less than half its time: the dispatcher reads one in every task report.
// ok is false for anything else, which is UnmarshalText's to read or
// refuse.
func parseUTC(s string) (time.Time, bool) {
	const short = len("2006-01-02T15:04:05Z")
	if len(s) < short || len(s) > short+10 || len(s) == short+1 || s[len(s)-1] != 'Z' ||
		s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := atoiDigits(s[0:4])
	month, ok2 := atoiDigits(s[5:7])
	day, ok3 := atoiDigits(s[8:10])
	hour, ok4 := atoiDigits(s[11:13])
	minute, ok5 := atoiDigits(s[14:16])
	sec, ok6 := atoiDigits(s[17:19])
	ok := ok1 && ok2 && ok3 && ok4 && ok5 && ok6
	ns := 0
	if len(s) > short {
		if s[short-1] != '.' {
			return time.Time{}, false
		}
		frac := s[short : len(s)-1]
		n, okf := atoiDigits(frac)
		ok = ok && okf
		ns = n * pow10[9-len(frac)]
	}
	if !ok || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	unix := int64(daysSinceEpoch(year, month, day))*86400 + int64(hour*3600+minute*60+sec)
	return time.Unix(unix, int64(ns)).UTC(), true
}

// pow10[i] is 10^i, for scaling fractions to nanoseconds.
var pow10 = [...]int{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// atoiDigits reads s, which holds only decimal digits (at most nine);
// ok is false when it holds anything else.
func atoiDigits(s string) (n int, ok bool) {
	for i := range len(s) {
		c := s[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = 10*n + int(c)
	}
	return n, true
}

// daysIn is the number of days of month (1–12) in year.
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysSinceEpoch is the number of days from 1970-01-01 to a date of the
// proleptic Gregorian calendar with year 0 to 9999: counted in 400-year
// eras of 146,097 days, from years that begin on March 1 so that a leap
// day ends its year.
func daysSinceEpoch(year, month, day int) int {
	if month <= 2 {
		year--
	}
	year += 400 // year 0 − 1 stays positive: eras divide without care for sign
	era, yoe := year/400, year%400
	mp := (month + 9) % 12 // March is 0
	doy := (153*mp+2)/5 + day - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return (era-1)*146097 + doe - 719468
}
