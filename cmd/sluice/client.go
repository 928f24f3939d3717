package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
)

// defaultAddr is where the client commands look for a dispatcher: the
// address `sluice dev` serves on.
const defaultAddr = "http://127.0.0.1:8080"

// Output formats of -o.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// clientFlags are the flags every client command has.
type clientFlags struct {
	addr      string
	token     string
	tokenFile string
	output    string
	timeout   time.Duration
}

// addClientFlags adds the client flags to c.
func addClientFlags(c *cobra.Command) *clientFlags {
	f := &clientFlags{}
	fs := c.Flags()
	fs.StringVar(&f.addr, "addr", defaultAddr, "dispatcher base URLs, comma-separated; tried in order, redirects to the leader followed")
	fs.StringVar(&f.token, "token", "", "bearer token")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token (wins over --token)")
	fs.StringVarP(&f.output, "output", "o", outputTable, "output format: table or json")
	fs.DurationVar(&f.timeout, "timeout", api.DefaultClientTimeout, "timeout of each request")
	return f
}

// client applies the environment to c's flags, checks them and returns a
// client. Call it first in RunE.
func (f *clientFlags) client(c *cobra.Command) (*api.Client, error) {
	if err := applyEnv(c); err != nil {
		return nil, err
	}
	if f.output != outputTable && f.output != outputJSON {
		return nil, usageError{fmt.Errorf("-o %q: want table or json", f.output)}
	}
	token := f.token
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("read token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	var addrs []string
	for a := range strings.SplitSeq(f.addr, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if !strings.Contains(a, "://") {
			a = "http://" + a
		}
		addrs = append(addrs, a)
	}
	cl, err := api.NewClient(api.ClientConfig{Addrs: addrs, Token: token, Timeout: f.timeout})
	if err != nil {
		return nil, usageError{fmt.Errorf("--addr %q: %w", f.addr, err)}
	}
	return cl, nil
}

func (f *clientFlags) json() bool { return f.output == outputJSON }

// serverError is an error reply of the dispatcher, shown as it said it:
// its message, then each problem on a line of its own.
type serverError struct{ e *api.APIError }

func (e serverError) Error() string {
	var b strings.Builder
	msg := e.e.ErrorResponse.Error
	if msg == "" {
		msg = "error"
	}
	b.WriteString(msg)
	fmt.Fprintf(&b, " (HTTP %d", e.e.Status)
	if e.e.Code != "" {
		b.WriteString(", " + e.e.Code)
	}
	b.WriteString(")")
	for _, p := range e.e.Problems {
		b.WriteString("\n  " + p.String())
	}
	if n := e.e.Total - len(e.e.Problems); n > 0 && len(e.e.Problems) > 0 {
		fmt.Fprintf(&b, "\n  ... and %d more problems", n)
	}
	return b.String()
}

func (e serverError) Unwrap() error { return e.e }

// explain turns an error of the client into what the user reads.
func explain(err error) error {
	var ae *api.APIError
	var ue *api.UnreachableError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return serverError{ae}
	case errors.As(err, &ue):
		return fmt.Errorf("%w\nis a dispatcher running there? Start a local cluster with 'sluice dev', or point --addr (SLUICE_ADDR) at one", err)
	default:
		return err
	}
}

// printIndented writes v as indented JSON, for -o json.
func printIndented(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// table writes aligned columns; rows are tab-separated.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }

func itoa[T ~int | ~int32 | ~int64 | ~uint64](n T) string { return strconv.FormatInt(int64(n), 10) }

// age says how long ago t was, in its largest unit: 45s, 12m, 3h, 5d.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// cores formats millicores as cores: 16, 1.5, 0.25.
func cores(m int64) string {
	return strconv.FormatFloat(float64(m)/1000, 'f', -1, 64)
}

// bytesIEC formats a byte count with a binary unit: 512Mi, 1.5Gi, 64Gi.
func bytesIEC(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return strconv.FormatInt(n, 10)
	}
	v, u := float64(n), -1
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	if v >= 100 {
		s = strconv.FormatFloat(v, 'f', 0, 64)
	}
	return s + string(units[u]) + "i"
}
