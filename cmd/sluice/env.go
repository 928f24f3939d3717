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

// applySettings fills the flags of c that the command line did not set:
// first from their SLUICE_* environment variables, then from the config
// file named by the command's --config flag, if it has one and it is set.
// A config file holds "name = value" lines (flag names without dashes;
// '#' starts a comment). Call it first in a command's RunE.
func applySettings(c *cobra.Command) error {
	if err := applyEnv(c); err != nil {
		return err
	}
	f := c.Flags().Lookup("config")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	path := f.Value.String()
	data, err := os.ReadFile(path)
	if err != nil {
		return usageError{fmt.Errorf("config file: %w", err)}
	}
	for i, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		fl := c.Flags().Lookup(name)
		switch {
		case !ok:
			return usageError{fmt.Errorf("%s:%d: want name = value, got %q", path, i+1, line)}
		case fl == nil || name == "config":
			return usageError{fmt.Errorf("%s:%d: %q is not a setting of %s", path, i+1, name, c.CommandPath())}
		case fl.Changed:
			continue
		}
		if err := c.Flags().Set(name, value); err != nil {
			return usageError{fmt.Errorf("%s:%d: %s: %w", path, i+1, name, err)}
		}
	}
	return nil
}
