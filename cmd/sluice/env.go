package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix prefixes the environment variable of every flag: --http-addr
// is also SLUICE_HTTP_ADDR.
const envPrefix = "SLUICE_"

// envName is the environment variable that sets the flag named name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// applyEnv sets every flag of c not given on the command line from its
// environment variable, when that is set; the command line wins. Call it
// first in a command's RunE.
func applyEnv(c *cobra.Command) error {
	var err error
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		if e := c.Flags().Set(f.Name, v); e != nil {
			err = usageError{fmt.Errorf("%s=%q: %w", envName(f.Name), v, e)}
		}
	})
	return err
}
