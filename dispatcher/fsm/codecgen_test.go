package fsm_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/codecgen"
)

// TestGeneratedCodecsCurrent fails when running the package's go:generate
// directive would change the generated spec codec: a field of api's spec
// types was added, removed or retagged without running go generate.
func TestGeneratedCodecsCurrent(t *testing.T) {
	if err := codecgen.Check("."); err != nil {
		t.Fatal(err)
	}
}
