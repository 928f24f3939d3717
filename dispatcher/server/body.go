package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/sluicehq/sluice/api"
	"github.com/valyala/fasthttp"
)

// zstdDecoders keeps synchronous zstd decoders between requests. A decoder
// refuses frames whose window exceeds the body limit.
var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(api.MaxBodyBytes), zstd.WithDecoderMaxMemory(api.MaxBodyBytes+1))
	if err != nil {
		panic(fmt.Sprintf("server: zstd decoder: %v", err)) // only bad options fail
	}
	return d
}}

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

// readBody returns the request body, decompressed per its Content-Encoding
// (identity, gzip or zstd), at most api.MaxBodyBytes of it.
func readBody(ctx *fasthttp.RequestCtx) ([]byte, *httpError) {
	raw := ctx.Request.Body()
	if len(raw) > api.MaxBodyBytes {
		return nil, tooLarge(len(raw))
	}
	enc := strings.ToLower(strings.TrimSpace(string(ctx.Request.Header.ContentEncoding())))
	var r io.Reader
	switch enc {
	case "", "identity":
		return raw, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, corrupt("gzip", err)
		}
		defer zr.Close()
		r = zr
	case "zstd":
		zr := zstdDecoders.Get().(*zstd.Decoder)
		if err := zr.Reset(bytes.NewReader(raw)); err != nil {
			zstdDecoders.Put(zr)
			return nil, corrupt("zstd", err)
		}
		defer func() {
			_ = zr.Reset(nil)
			zstdDecoders.Put(zr)
		}()
		r = zr
	default:
		return nil, errorf(fasthttp.StatusUnsupportedMediaType, api.CodeUnsupportedMedia,
			"Content-Encoding %q is not supported: want identity, gzip or zstd", clip(enc, 100))
	}
	var buf bytes.Buffer
	buf.Grow(min(4*len(raw)+512, api.MaxBodyBytes+1))
	n, err := buf.ReadFrom(io.LimitReader(r, api.MaxBodyBytes+1))
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || n > api.MaxBodyBytes {
		return nil, errorf(fasthttp.StatusRequestEntityTooLarge, api.CodeTooLarge,
			"the %s body decompresses to more than the limit of %d bytes", enc, api.MaxBodyBytes)
	}
	if err != nil {
		return nil, corrupt(enc, err)
	}
	return buf.Bytes(), nil
}

func tooLarge(n int) *httpError {
	return errorf(fasthttp.StatusRequestEntityTooLarge, api.CodeTooLarge,
		"the body is %d bytes, more than the limit of %d", n, api.MaxBodyBytes)
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
