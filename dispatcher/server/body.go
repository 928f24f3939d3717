package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/sluicehq/sluice/api"
	"github.com/valyala/fasthttp"
)

// Memory of request bodies: a Handler counts every byte of body it holds
// (read from the wire, or decompressed) against HandlerConfig.BodyMemory,
// taken before the memory is allocated and given back when ServeFastHTTP
// returns; a request that would go over it is answered 503 with
// Retry-After. Buffers larger than maxPooledBuffer are never pooled.
const (
	// DefaultBodyMemory is HandlerConfig.BodyMemory's default: two bodies
	// of the largest size at once. The heap grows past what bodies hold
	// by the buffers they grew out of and the collector's slack, a few
	// times the bound at the peak.
	DefaultBodyMemory = 2 * api.MaxBodyBytes
	// MinBodyMemory is the least HandlerConfig.BodyMemory: one body of
	// the largest size, decompressed by a zstd decoder.
	MinBodyMemory = api.MaxBodyBytes + zstdDecoderMemory

	// ZstdMaxWindow is the largest zstd window a body may use. RFC 9659
	// limits the window of the zstd content coding to 8 MB, which is also
	// the window of the encoders of klauspost/compress (the api client's)
	// and of the zstd tool's levels up to 19: a decoder holds a window's
	// worth of output, so a larger one would let a small body make the
	// server hold much more than it declares.
	ZstdMaxWindow = 8 << 20
	// zstdDecoderMemory is what a body's zstd decoder is counted as
	// holding: its window and the ring's two blocks of slack, its block
	// buffers and tables.
	zstdDecoderMemory = ZstdMaxWindow + 1<<20
	// gzipDecoderMemory is what a body's gzip reader is counted as
	// holding: flate's 32 KiB window, its tables and read buffer.
	gzipDecoderMemory = 64 << 10
	// maxPooledZstd bounds the zstd decoders kept between requests, each
	// holding up to zstdDecoderMemory.
	maxPooledZstd = 2

	// maxPooledBuffer is the largest buffer (of a body, or of a reply)
	// kept in a pool for the next request: a larger one is left to the
	// collector, so that a burst of large bodies leaves no memory behind.
	maxPooledBuffer = 1 << 20
	// minBodyBuffer is the first capacity of a body buffer of unknown
	// size; it doubles as the body arrives.
	minBodyBuffer = 32 << 10
	// maxRegisterBody is the most a node registration's body may be: an
	// api.NodeSpec, a few kilobytes with every label.
	maxRegisterBody = 1 << 20
	// maxDrainBody is the most a drain request's body may be: an
	// api.DrainRequest, two short members.
	maxDrainBody = 4 << 10
	// bigBody is the memory of a body after which, once no body is held,
	// the handler returns the heap's free memory to the operating system,
	// which the collector would keep for minutes otherwise; at most once
	// every minFreeInterval, since it costs a collection of the whole
	// heap.
	bigBody         = 8 << 20
	minFreeInterval = 10 * time.Second
)

// zstdDecoders keeps up to maxPooledZstd synchronous zstd decoders between
// requests: a decoder keeps the window buffer of the largest frame it read.
// A decoder's options bound that window to ZstdMaxWindow: MaxWindow for a
// frame that declares a window, MaxMemory for a single-segment one, whose
// window is its content size.
var zstdDecoders = make(chan *zstd.Decoder, maxPooledZstd)

func getZstd() (*zstd.Decoder, error) {
	select {
	case d := <-zstdDecoders:
		return d, nil
	default:
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(ZstdMaxWindow), zstd.WithDecoderMaxMemory(ZstdMaxWindow))
	if err != nil {
		return nil, fmt.Errorf("server: zstd decoder: %w", err)
	}
	return d, nil
}

func putZstd(d *zstd.Decoder) {
	_ = d.Reset(nil)
	select {
	case zstdDecoders <- d:
	default:
		d.Close()
	}
}

// bodyBuffers keeps buffers of at most maxPooledBuffer bytes, of request
// bodies and of replies encoded by hand (writeEncoded).
var bodyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// putBuffer gives bp, emptied, back to bodyBuffers, unless it holds more
// than maxPooledBuffer bytes: that one is left to the collector.
func putBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooledBuffer {
		*bp = (*bp)[:0]
		bodyBuffers.Put(bp)
	}
}

// bodyMemory counts the bytes of request bodies a Handler's requests
// hold, against a limit. It never blocks.
type bodyMemory struct {
	limit int64
	used  atomic.Int64
	// big is set when a body of bigBody or more is given back, and
	// cleared when the memory is returned to the operating system, which
	// was last at freed (Unix nanoseconds).
	big   atomic.Bool
	freed atomic.Int64
}

// take counts n more bytes held, if they fit under the limit.
func (m *bodyMemory) take(n int64) bool {
	for {
		u := m.used.Load()
		if u+n > m.limit {
			return false
		}
		if m.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// give counts n bytes fewer held. When a big body was given back since
// the memory was last returned, none is held now, and the last return
// was minFreeInterval ago or more, it returns the heap's free memory to
// the operating system (a collection and a scavenge) before it returns:
// at the end of a burst of large bodies rather than minutes later.
func (m *bodyMemory) give(n int64) {
	if n >= bigBody {
		m.big.Store(true)
	}
	if m.used.Add(-n) != 0 || !m.big.Load() {
		return
	}
	now, last := time.Now().UnixNano(), m.freed.Load()
	if now-last >= int64(minFreeInterval) && m.freed.CompareAndSwap(last, now) {
		m.big.Store(false)
		// Not in the request's path: give runs before the reply is
		// written, and a collection of the whole heap may take long. The
		// goroutine ends when the call does; the interval bounds them.
		go debug.FreeOSMemory()
	}
}

// heldBodyKey is the request's user value that holds the *heldBody of a
// request that read its body.
type heldBodyKey struct{}

// heldBody is what one request's body holds, counted in mem: its buffer
// (n bytes counted), and its decoder's memory (dec bytes).
type heldBody struct {
	mem *bodyMemory
	n   int64
	dec int64
	buf *[]byte // from bodyBuffers or grown; nil before the body is read
}

var heldBodies = sync.Pool{New: func() any { return new(heldBody) }}

// holdTo makes sure b counts at least n bytes for its buffer, or answers
// 503.
func (b *heldBody) holdTo(n int64) *httpError {
	if n <= b.n {
		return nil
	}
	if !b.mem.take(n - b.n) {
		return b.full()
	}
	b.n = n
	return nil
}

// holdDecoder counts n bytes for b's decoder, or answers 503.
func (b *heldBody) holdDecoder(n int64) *httpError {
	if !b.mem.take(n) {
		return b.full()
	}
	b.dec += n
	return nil
}

func (b *heldBody) full() *httpError {
	return unavailable("the server holds as many request bodies in memory as it may (%d bytes); retry", b.mem.limit)
}

// grow replaces b's buffer, buf, by one of capacity n holding its bytes;
// the old one goes back to bodyBuffers if it is small enough.
func (b *heldBody) grow(buf []byte, n int) []byte {
	grown := make([]byte, len(buf), n)
	copy(grown, buf)
	if cap(buf) > 0 {
		old := buf
		putBuffer(&old)
	}
	*b.buf = grown
	return grown
}

// release gives back what b holds and b itself.
func (b *heldBody) release() {
	b.mem.give(b.n + b.dec)
	if b.buf != nil {
		putBuffer(b.buf)
	}
	*b = heldBody{}
	heldBodies.Put(b)
}

// releaseBody gives back what the request's body holds; ServeFastHTTP
// calls it when it returns, whatever happened.
func releaseBody(ctx *fasthttp.RequestCtx) {
	if b, ok := ctx.UserValue(heldBodyKey{}).(*heldBody); ok {
		ctx.RemoveUserValue(heldBodyKey{})
		b.release()
	}
}

// checkContentType accepts a request body's media type if it is one of
// want (or absent, when absentOK).
func checkContentType(ctx *fasthttp.RequestCtx, absentOK bool, want ...string) *httpError {
	ct := strings.TrimSpace(string(ctx.Request.Header.ContentType()))
	if ct == "" && absentOK {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil {
		for _, w := range want {
			if mt == w {
				return nil
			}
		}
	}
	return errorf(fasthttp.StatusUnsupportedMediaType, api.CodeUnsupportedMedia,
		"Content-Type %q is not supported: want %s", clip(ct, 100), strings.Join(want, " or "))
}

// bodyLimit is the most bytes of body a request of method on path may
// send, and decompress to: writes (POST) take bodies up to
// api.MaxBodyBytes, a node's registration up to maxRegisterBody, a drain
// request up to maxDrainBody, a replica's addition up to maxMemberBody;
// reads and
// the long-polls (GET) and deletions (DELETE, named by query parameters)
// take none.
func bodyLimit(method, path string) int {
	switch {
	case method != fasthttp.MethodPost:
		return 0
	case path == api.PathNodes:
		return maxRegisterBody
	case strings.HasPrefix(path, api.PathNode) && strings.HasSuffix(path, "/drain"):
		return maxDrainBody
	case path == api.PathMembers:
		return maxMemberBody
	case strings.HasPrefix(path, api.PathQueue):
		return maxQueueBody
	}
	return api.MaxBodyBytes
}

// checkDeclaredLength refuses a request whose declared Content-Length is
// over its route's limit, before any of its body is read.
func checkDeclaredLength(ctx *fasthttp.RequestCtx, method, path string) *httpError {
	n := ctx.Request.Header.ContentLength()
	limit := bodyLimit(method, path)
	switch {
	case n <= limit:
		return nil
	case limit == 0:
		return errorf(fasthttp.StatusRequestEntityTooLarge, api.CodeTooLarge, "%s %s takes no body", clip(method, 20), clip(path, 200))
	}
	return tooLarge(n, limit)
}

// readBody returns the request body, decompressed per its Content-Encoding
// (identity, gzip or zstd), at most the route's limit (bodyLimit) of it
// before and after decompression. It reads the body as it arrives (a
// server with StreamRequestBody), decompressing as it goes, into memory
// counted against the handler's BodyMemory: the bytes are the caller's
// until ServeFastHTTP returns, and the memory is given back then.
func (h *Handler) readBody(ctx *fasthttp.RequestCtx) ([]byte, *httpError) {
	limit := bodyLimit(string(ctx.Method()), string(ctx.Path()))
	enc := strings.ToLower(strings.TrimSpace(string(ctx.Request.Header.ContentEncoding())))
	switch enc {
	case "", "identity", "gzip", "x-gzip", "zstd":
	default:
		return nil, errorf(fasthttp.StatusUnsupportedMediaType, api.CodeUnsupportedMedia,
			"Content-Encoding %q is not supported: want identity, gzip or zstd", clip(enc, 100))
	}
	declared := ctx.Request.Header.ContentLength() // -1: chunked; at most limit (route's checkDeclaredLength)
	if _, ok := ctx.UserValue(heldBodyKey{}).(*heldBody); ok {
		return nil, errorf(fasthttp.StatusInternalServerError, api.CodeInternal, "internal error: the body was read twice")
	}
	held := heldBodies.Get().(*heldBody)
	held.mem = h.mem
	ctx.SetUserValue(heldBodyKey{}, held)

	var wire io.Reader
	if s := ctx.Request.BodyStream(); s != nil {
		wire = s
	} else {
		// A server without StreamRequestBody read the body already.
		raw := ctx.Request.Body()
		if len(raw) > limit {
			return nil, tooLarge(len(raw), limit)
		}
		if enc == "" || enc == "identity" {
			return raw, nil
		}
		wire = bytes.NewReader(raw)
	}
	lr := &limitedReader{r: wire, n: int64(limit) + 1}
	switch enc {
	case "", "identity":
		if declared >= 0 {
			// Count all it declares first, so that a body is refused
			// before it is read rather than half-way.
			if e := held.holdTo(int64(declared)); e != nil {
				return nil, e
			}
		}
		return readAll(held, lr, lr, "", limit, declared)
	case "gzip", "x-gzip":
		if e := held.holdDecoder(gzipDecoderMemory); e != nil {
			return nil, e
		}
		zr, err := gzip.NewReader(lr)
		if err != nil {
			return nil, readError(lr, enc, limit, err)
		}
		defer zr.Close()
		body, e := readAll(held, zr, lr, enc, limit, -1)
		return checkWhole(lr, declared, body, e)
	default: // zstd
		if e := held.holdDecoder(zstdDecoderMemory); e != nil {
			return nil, e
		}
		zr, err := getZstd()
		if err != nil {
			return nil, errorf(fasthttp.StatusInternalServerError, api.CodeInternal, "internal error: %v", err)
		}
		defer putZstd(zr)
		if err := zr.Reset(lr); err != nil {
			return nil, readError(lr, enc, limit, err)
		}
		body, e := readAll(held, zr, lr, enc, limit, -1)
		return checkWhole(lr, declared, body, e)
	}
}

// checkWhole checks, after a compressed body was read to its end (body,
// e), that its wire was too: a wire cut short between two gzip members or
// zstd frames decompresses without an error.
func checkWhole(lr *limitedReader, declared int, body []byte, e *httpError) ([]byte, *httpError) {
	if e == nil && declared >= 0 && lr.got < int64(declared) {
		return nil, cutShort(int(lr.got), declared)
	}
	return body, e
}

func cutShort(got, declared int) *httpError {
	return errorf(fasthttp.StatusBadRequest, api.CodeInvalid, "the body ended after %d of the %d bytes it declared", got, declared)
}

// readAll reads r to its end, at most limit bytes (else a 413), into
// memory counted in held before it is allocated. lr is the wire under r
// (r itself when the body is not compressed), enc the encoding ("" for
// none), declared the body's length if known (else -1).
//
// A body of known length is read into a buffer that doubles as bytes
// arrive, up to that length. One of unknown length (decompressed, or
// chunked) is read into chunks of up to maxPooledBuffer bytes, copied into
// one buffer at its end: a body cut off at the limit, as a decompression
// bomb is, leaves behind only chunks of one size, which the allocator
// reuses, rather than buffers of every size to the limit. A buffer a body
// outgrew is not counted: it is the collector's.
func readAll(held *heldBody, r io.Reader, lr *limitedReader, enc string, limit, declared int) ([]byte, *httpError) {
	held.buf = bodyBuffers.Get().(*[]byte)
	buf := (*held.buf)[:0]
	if declared > cap(buf) && declared <= maxPooledBuffer {
		// A body of known length up to a pooled buffer's size is read
		// into one buffer of its length (counted already), not grown
		// to it by copies: submits and reports are such bodies.
		buf = held.grow(buf, declared)
	}
	if e := held.holdTo(int64(cap(buf))); e != nil {
		return nil, e
	}
	var chunks [][]byte // full chunks before buf, when declared < 0
	total := 0          // bytes in chunks
	for {
		n := total + len(buf)
		if declared >= 0 && n == declared {
			return buf, nil
		}
		if n >= limit {
			// At the limit: the body is over it if anything follows.
			switch more, err := anyMore(r); {
			case err != nil:
				return nil, readError(lr, enc, limit, err)
			case more:
				return nil, overLimit(enc, limit)
			}
			return held.join(chunks, buf, total), nil
		}
		if len(buf) == cap(buf) {
			grow := max(2*cap(buf), minBodyBuffer)
			if declared >= 0 {
				// Double, to the declared length.
				grow = min(grow, declared)
				if e := held.holdTo(int64(grow)); e != nil {
					return nil, e
				}
				buf = held.grow(buf, grow)
			} else {
				// A new chunk, to the limit.
				grow = min(grow, maxPooledBuffer, limit-n)
				if e := held.holdTo(held.n + int64(grow)); e != nil {
					return nil, e
				}
				if cap(buf) > 0 {
					chunks, total = append(chunks, buf), total+len(buf)
				}
				buf = make([]byte, 0, grow)
			}
		}
		m, err := readSome(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if len(chunks) == 0 {
			*held.buf = buf
		}
		switch {
		case errors.Is(err, io.EOF) && declared >= 0 && total+len(buf) < declared:
			// fasthttp ends a request's stream cut short with io.EOF.
			return nil, cutShort(total+len(buf), declared)
		case errors.Is(err, io.EOF):
			return held.join(chunks, buf, total), nil
		case err != nil:
			return nil, readError(lr, enc, limit, err)
		}
	}
}

// join returns the body read into chunks (total bytes) and then last, as
// one buffer that b holds; the first chunk, from bodyBuffers, goes back.
func (b *heldBody) join(chunks [][]byte, last []byte, total int) []byte {
	if len(chunks) == 0 {
		return last
	}
	body := make([]byte, 0, total+len(last))
	for _, c := range chunks {
		body = append(body, c...)
	}
	body = append(body, last...)
	*b.buf = chunks[0]
	putBuffer(b.buf)
	b.buf = &body
	return body
}

// readSome reads into p until it gets a byte or an error; a reader that
// keeps returning nothing is an io.ErrNoProgress.
func readSome(r io.Reader, p []byte) (int, error) {
	for range 100 {
		if m, err := r.Read(p); m > 0 || err != nil {
			return m, err
		}
	}
	return 0, io.ErrNoProgress
}

// anyMore reports whether r has a byte more before its end.
func anyMore(r io.Reader) (bool, error) {
	var one [1]byte
	switch m, err := readSome(r, one[:]); {
	case m > 0:
		return true, nil
	case errors.Is(err, io.EOF):
		return false, nil
	default:
		return false, err
	}
}

// overLimit is the reply to a body that is, or decompresses to, more than
// limit bytes.
func overLimit(enc string, limit int) *httpError {
	if enc == "" {
		return errorf(fasthttp.StatusRequestEntityTooLarge, api.CodeTooLarge, "the body is more than the limit of %d bytes", limit)
	}
	return errorf(fasthttp.StatusRequestEntityTooLarge, api.CodeTooLarge,
		"the %s body decompresses to more than the limit of %d bytes", enc, limit)
}

// readError is the reply to err, met reading a body whose wire is lr: a
// 413 when the wire went over limit or a zstd frame's window over
// ZstdMaxWindow, a 408 on a timeout, a 400 otherwise.
func readError(lr *limitedReader, enc string, limit int, err error) *httpError {
	var ne net.Error
	switch {
	case lr.over():
		return overLimit("", limit)
	case errors.As(lr.err, &ne) && ne.Timeout():
		return errorf(fasthttp.StatusRequestTimeout, api.CodeInvalid, "timed out reading the body")
	case lr.err != nil:
		return errorf(fasthttp.StatusBadRequest, api.CodeInvalid, "reading the body: %s", clip(lr.err.Error(), 200))
	case enc == "":
		return errorf(fasthttp.StatusBadRequest, api.CodeInvalid, "reading the body: %s", clip(err.Error(), 200))
	case errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) && lr.zstdWindowOver():
		return errorf(fasthttp.StatusRequestEntityTooLarge, api.CodeTooLarge,
			"the zstd body's window is more than the limit of %d bytes", ZstdMaxWindow)
	}
	return corrupt(enc, err)
}

// limitedReader reads at most n bytes of r, then reports io.EOF; over
// says whether it stopped there. It keeps r's error other than io.EOF,
// and the first bytes read, for zstdWindowOver.
type limitedReader struct {
	r     io.Reader
	n     int64
	got   int64 // bytes read
	err   error
	head  [zstd.HeaderMaxSize]byte
	headN int
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	m, err := l.r.Read(p)
	l.n -= int64(m)
	l.got += int64(m)
	l.headN += copy(l.head[l.headN:], p[:m])
	if err != nil && !errors.Is(err, io.EOF) {
		l.err = err
	}
	return m, err
}

// over reports whether the reader stopped at its limit: the wire had more.
func (l *limitedReader) over() bool { return l.n <= 0 }

// zstdWindowOver reports whether the body's first zstd frame declares a
// window over ZstdMaxWindow (the decoder's ErrWindowSizeExceeded also
// means a corrupt block's reference out of its window).
func (l *limitedReader) zstdWindowOver() bool {
	var h zstd.Header
	return h.Decode(l.head[:l.headN]) == nil && !h.SingleSegment && h.WindowSize > ZstdMaxWindow
}

func tooLarge(n, limit int) *httpError {
	return errorf(fasthttp.StatusRequestEntityTooLarge, api.CodeTooLarge,
		"the body is %d bytes, more than the limit of %d", n, limit)
}

func corrupt(enc string, err error) *httpError {
	return errorf(fasthttp.StatusBadRequest, api.CodeInvalid,
		"the %s body is corrupt or truncated: %s", enc, clip(err.Error(), 200))
}

// clip shortens s for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
