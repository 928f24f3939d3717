// Command codecgen writes a package's codecs from its Go types. A
// directive in the package (a go:generate comment) runs it there; package
// internal/codecgen describes its arguments.
package main

import (
	"fmt"
	"os"

	"github.com/sluicehq/sluice/internal/codecgen"
)

func main() {
	name, src, err := codecgen.Run(".", os.Args[1:])
	if err == nil {
		if err = os.WriteFile(name, src, 0o644); err != nil {
			err = fmt.Errorf("codecgen: %w", err)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
