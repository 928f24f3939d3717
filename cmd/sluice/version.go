package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time by the Makefile:
// -ldflags "-X main.version=$(git describe --always --dirty)".
var version = "dev"

// buildInfo is what `sluice version` reports.
type buildInfo struct {
	Version   string `json:"version"`
	Module    string `json:"module"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

func currentBuild() buildInfo {
	b := buildInfo{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok {
		b.Module = info.Main.Path
		if b.Version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
	}
	return b
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			b := currentBuild()
			if asJSON {
				enc := json.NewEncoder(c.OutOrStdout())
				return enc.Encode(b)
			}
			_, err := fmt.Fprintf(c.OutOrStdout(), "sluice %s (%s, %s)\n", b.Version, b.GoVersion, b.Platform)
			return err
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as a JSON object")
	return c
}
