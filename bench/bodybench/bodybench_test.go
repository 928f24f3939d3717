package bodybench_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/sluicehq/sluice/bench/bodybench"
)

func TestValidate(t *testing.T) {
	bad := bodybench.Config{Conns: -1, Phases: []string{"slow", "brotli"}}
	err := bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "negative") || !strings.Contains(err.Error(), `"brotli"`) {
		t.Fatalf("Validate = %v; want both problems named", err)
	}
	if _, err := bodybench.Run(context.Background(), bad); err == nil {
		t.Fatal("Run took an invalid config")
	}
	good := bodybench.Config{Phases: []string{"gzip"}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestRunFailsWithoutADispatcher: a binary that is no sluice is an error
// naming the phase, not a hang.
func TestRunFailsWithoutADispatcher(t *testing.T) {
	_, err := bodybench.Run(context.Background(), bodybench.Config{Exec: "/bin/false", Phases: []string{"slow"}, Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "phase slow") {
		t.Fatalf("Run with /bin/false = %v; want the phase's error", err)
	}
}

func TestStatusText(t *testing.T) {
	if got := bodybench.StatusText(map[int]int{503: 6, 0: 2, 401: 10}); got != "none×2 401×10 503×6" {
		t.Fatalf("StatusText = %q", got)
	}
}

func TestGzipBombSize(t *testing.T) {
	b, err := bodybench.Bomb("gzip", 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, zr)
	if err != nil || n != 8<<20 || len(b) > 64<<10 {
		t.Fatalf("a bomb of %d bytes decompresses to %d (%v); want 8 MiB from under 64 KiB", len(b), n, err)
	}
}
