// Command codecgen writes a package's codecs from its Go types. A
// directive in the package (a go:generate comment) runs it there; package
// internal/codecgen describes its arguments.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/internal/codecgen"
)

func main() {
	files, err := codecgen.Run(".", os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(".", name), src, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "codecgen:", err)
			os.Exit(1)
		}
	}
}
