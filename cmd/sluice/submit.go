package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
)

const (
	// submitRetries is how many times a failed submit request is sent
	// again when the failure may pass (no connection, 503). Its
	// idempotency key makes that safe.
	submitRetries = 2
	// submitBackoff is the wait before the first retry; it doubles.
	submitBackoff = 250 * time.Millisecond
	// maxBaseKeyLen leaves room in api.MaxIdempotencyKeyLen for the
	// request number and the server's "/item" suffix.
	maxBaseKeyLen = api.MaxIdempotencyKeyLen - 20
)

func newSubmitCmd() *cobra.Command {
	var (
		batch, parallel int
		baseKey, enc    string
	)
	c := &cobra.Command{
		Use:   "submit FILE|-",
		Short: "Submit jobs (one object, an array or NDJSON) and print their IDs",
		Long: `Submit checks the file exactly as 'sluice validate' does and sends nothing
when it has a problem. A valid file is sent as written; one of more than
--batch jobs is split into requests of --batch jobs, sent by --parallel
workers. Every request carries an idempotency key made of a base key (random,
or --idempotency-key) and the request's number, so rerunning a submission that
failed part way with the same --idempotency-key and --batch creates no job
twice. The job IDs are printed one per line, in the order of the file.`,
		Args: usageArgs(cobra.ExactArgs(1)),
	}
	cf := addClientFlags(c)
	c.Flags().IntVar(&batch, "batch", 1000, "most jobs per request")
	c.Flags().IntVar(&parallel, "parallel", 4, "requests in flight at once")
	c.Flags().StringVar(&baseKey, "idempotency-key", "", "base of the requests' idempotency keys (default random); reuse it to resubmit safely")
	c.Flags().StringVar(&enc, "compress", "", "compress request bodies: gzip or zstd")
	c.RunE = func(c *cobra.Command, args []string) error {
		cl, err := cf.client(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		switch {
		case batch < 1 || batch > api.MaxItemsPerRequest:
			return usageError{fmt.Errorf("--batch %d: want 1 to %d", batch, api.MaxItemsPerRequest)}
		case parallel < 1:
			return usageError{fmt.Errorf("--parallel %d: want at least 1", parallel)}
		case enc != "" && enc != "gzip" && enc != "zstd":
			return usageError{fmt.Errorf("--compress %q: want gzip or zstd", enc)}
		case len(baseKey) > maxBaseKeyLen:
			return usageError{fmt.Errorf("--idempotency-key: longer than %d bytes", maxBaseKeyLen)}
		}
		body, err := readInput(c.InOrStdin(), args[0])
		if err != nil {
			return err
		}
		jobs, err := api.DecodeJobs(body)
		if err != nil {
			return report(c.ErrOrStderr(), "", err)
		}
		if baseKey == "" {
			b := make([]byte, 12)
			rand.Read(b) //nolint:errcheck // never fails
			baseKey = hex.EncodeToString(b)
		}
		reqs, err := splitSubmit(body, len(jobs), batch, baseKey)
		if err != nil {
			return err
		}
		s := &submission{client: cl, reqs: reqs, encoding: enc, parallel: parallel}
		if len(reqs) > 1 && isTerminal(c.ErrOrStderr()) {
			s.bar = progressbar.NewOptions(len(jobs),
				progressbar.OptionSetWriter(c.ErrOrStderr()),
				progressbar.OptionSetDescription("submitting"),
				progressbar.OptionShowCount(),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish(),
			)
		}
		s.run(c.Context())
		if s.bar != nil {
			s.bar.Exit() //nolint:errcheck // display only
		}
		return s.print(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), cf.json(), baseKey, batch)
	}
	return c
}

// submitRequest is one request of a submission.
type submitRequest struct {
	n           int // request number, from 0
	first, jobs int // the index of its first job in the file, and its jobs
	body        []byte
	contentType string
	key         string

	resp api.SubmitResponse
	err  error
	sent bool
}

// splitSubmit makes the requests of a file of njobs valid jobs: the body as
// written when it holds at most batch jobs, else JSON arrays of batch jobs
// each, cut from the file's own text.
func splitSubmit(body []byte, njobs, batch int, baseKey string) ([]*submitRequest, error) {
	key := func(n int) string { return fmt.Sprintf("%s-%d", baseKey, n) }
	if njobs <= batch {
		ct := "application/json"
		if t := bytes.TrimLeft(body, " \t\r\n\ufeff"); njobs > 1 && len(t) > 0 && t[0] == '{' {
			ct = "application/x-ndjson"
		}
		return []*submitRequest{{jobs: njobs, body: body, contentType: ct, key: key(0)}}, nil
	}
	items, err := rawItems(body)
	if err != nil {
		return nil, fmt.Errorf("split spec: %w", err)
	}
	if len(items) != njobs {
		return nil, fmt.Errorf("split spec: %d items, but %d jobs", len(items), njobs)
	}
	var reqs []*submitRequest
	for first := 0; first < len(items); first += batch {
		end := min(first+batch, len(items))
		var b bytes.Buffer
		b.WriteByte('[')
		for i, it := range items[first:end] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(it)
		}
		b.WriteByte(']')
		n := len(reqs)
		reqs = append(reqs, &submitRequest{n: n, first: first, jobs: end - first, body: b.Bytes(), contentType: "application/json", key: key(n)})
	}
	return reqs, nil
}

// rawItems returns the text of each item of a JSON array, or of each
// object of an object or NDJSON stream.
func rawItems(body []byte) ([]json.RawMessage, error) {
	body = bytes.TrimPrefix(body, []byte("\ufeff"))
	var items []json.RawMessage
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		err := json.Unmarshal(body, &items)
		return items, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		var m json.RawMessage
		if err := dec.Decode(&m); err == io.EOF {
			return items, nil
		} else if err != nil {
			return nil, err
		}
		items = append(items, m)
	}
}

// submission sends requests with parallel workers; after a failure it
// starts no more.
type submission struct {
	client   *api.Client
	reqs     []*submitRequest
	encoding string
	parallel int
	bar      *progressbar.ProgressBar
}

func (s *submission) run(ctx context.Context) {
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(s.parallel, len(s.reqs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(s.reqs) || failed.Load() || ctx.Err() != nil {
					return
				}
				r := s.reqs[i]
				r.resp, r.err = s.send(ctx, r)
				r.sent = true
				if r.err != nil {
					failed.Store(true)
				} else if s.bar != nil {
					s.bar.Add(r.jobs) //nolint:errcheck // display only
				}
			}
		})
	}
	wg.Wait()
}

// send sends r, again while the failure may pass.
func (s *submission) send(ctx context.Context, r *submitRequest) (api.SubmitResponse, error) {
	wait := submitBackoff
	for attempt := 0; ; attempt++ {
		resp, err := s.client.SubmitBody(ctx, r.body, r.contentType, api.SubmitOptions{IdempotencyKey: r.key, Encoding: s.encoding})
		if err == nil {
			if len(resp.Jobs) != r.jobs {
				return resp, fmt.Errorf("the dispatcher answered %d job IDs for %d jobs", len(resp.Jobs), r.jobs)
			}
			return resp, nil
		}
		if attempt == submitRetries || ctx.Err() != nil || !transient(err) {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return resp, ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// transient reports whether a failed request may succeed when sent again.
func transient(err error) bool {
	var ae *api.APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusServiceUnavailable || ae.Status == http.StatusTooManyRequests
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// print writes the IDs of the committed jobs and, when some request failed
// or was not sent, says which and returns an error.
func (s *submission) print(ctx context.Context, stdout, stderr io.Writer, asJSON bool, baseKey string, batch int) error {
	var merged api.SubmitResponse
	merged.Jobs = []string{}
	committed, failed, unsent := 0, 0, 0
	var firstErr error
	for _, r := range s.reqs {
		switch {
		case !r.sent:
			unsent++
			continue
		case r.err != nil:
			failed++
			if firstErr == nil {
				firstErr = r.err
			}
			continue
		}
		committed += r.jobs
		merged.Jobs = append(merged.Jobs, r.resp.Jobs...)
		for _, e := range r.resp.Existing {
			merged.Existing = append(merged.Existing, r.first+e)
		}
	}
	if failed == 0 && unsent == 0 {
		if asJSON {
			return printIndented(stdout, merged)
		}
		_, err := fmt.Fprint(stdout, strings.Join(merged.Jobs, "\n")+"\n")
		return err
	}
	if len(s.reqs) == 1 && firstErr != nil {
		return explain(firstErr)
	}
	if committed > 0 {
		if asJSON {
			printIndented(stdout, merged) //nolint:errcheck // the failure is what is reported
		} else {
			fmt.Fprint(stdout, strings.Join(merged.Jobs, "\n")+"\n")
		}
	}
	var total int
	for _, r := range s.reqs {
		total += r.jobs
		if r.sent && r.err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "request %d (jobs %d-%d): %v\n", r.n, r.first, r.first+r.jobs-1, explain(r.err))
		}
	}
	msg := fmt.Sprintf("%d of %d jobs committed; %d of %d requests failed", committed, total, failed, len(s.reqs))
	if unsent > 0 {
		msg += fmt.Sprintf(", %d not sent", unsent)
	}
	msg += fmt.Sprintf("; resubmit safely with --idempotency-key %s --batch %d", baseKey, batch)
	if err := ctx.Err(); err != nil {
		fmt.Fprintln(stderr, "sluice:", msg)
		return err
	}
	return errors.New(msg)
}
