package api_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/codecgen"
)

// TestGeneratedCodecsCurrent fails when running the package's go:generate
// directives would change a generated codec: a field was added, removed
// or retagged without running go generate.
func TestGeneratedCodecsCurrent(t *testing.T) {
	if err := codecgen.Check("."); err != nil {
		t.Fatal(err)
	}
}
