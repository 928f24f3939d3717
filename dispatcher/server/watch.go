package server

import (
	"bufio"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/valyala/fasthttp"
)

// watchPage is how many changed jobs one read of the FSM takes.
const watchPage = 1000

// watch serves GET /v1/watch: NDJSON WatchEvents of every job changed
// after from, then of every later change, until the client goes away or
// the server closes (for a job token, until its job has ended). Blank
// lines are keep-alives. With brief, the events'
// jobs leave out their spec's task groups.
func (h *Handler) watch(ctx *fasthttp.RequestCtx, p Principal, _ []string) *httpError {
	if e := checkQuery(ctx, "from", "brief"); e != nil {
		return e
	}
	var from uint64
	if v := ctx.QueryArgs().Peek("from"); v != nil {
		var err error
		if from, err = strconv.ParseUint(string(v), 10, 64); err != nil {
			return badParam("from", "want a raft index (a non-negative integer), got %q", clip(string(v), 40))
		}
	}
	var brief bool
	if v := ctx.QueryArgs().Peek("brief"); v != nil {
		var err error
		if brief, err = parseBool(string(v)); err != nil {
			return badParam("brief", "want 1 or 0, got %q", clip(string(v), 40))
		}
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/x-ndjson")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	h.streams.Add(1)
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer h.streams.Done()
		h.streamWatch(w, p, from, brief)
	})
	return nil
}

// streamWatch writes the watch stream until a write fails or the base
// context ends; brief leaves out the specs' task groups.
func (h *Handler) streamWatch(w *bufio.Writer, p Principal, from uint64, brief bool) {
	keepAlive := time.NewTimer(h.cfg.WatchKeepAlive)
	defer keepAlive.Stop()
	var line []byte
	// A first keep-alive sends the headers at once: fasthttp writes them
	// with the first bytes of the body.
	if w.WriteByte('\n') != nil || w.Flush() != nil {
		return
	}
	for {
		// Take the wake-up channel before reading: a change after the read
		// closes it.
		changed := h.cfg.Dispatcher.Changed()
		jobs, next := h.changedSince(from)
		for i := range jobs {
			j := &jobs[i]
			if !p.mayWatch(j.ID, j.Appmaster, j.Spec.Queue) {
				continue
			}
			ev := api.WatchEvent{Index: j.Changed, Job: jobStatus(&j.JobStatus)}
			if brief {
				ev.Job.Spec.Tasks = nil
			}
			var err error
			// Encoded by hand (as encoding/json would): one line per
			// changed job, to every watcher.
			line, err = api.AppendWatchEvent(line[:0], &ev)
			if err != nil {
				return
			}
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return
			}
			if p.Role == RoleJob && j.ID == p.Job && j.State != fsm.JobPending && j.State != fsm.JobRunning {
				// The job ended, and its token with it.
				_ = w.Flush()
				return
			}
		}
		from = next
		if len(jobs) > 0 {
			if w.Flush() != nil {
				return
			}
			keepAlive.Reset(h.cfg.WatchKeepAlive)
			continue // there may be more
		}
		select {
		case <-h.base.Done():
			return
		case <-changed:
		case <-keepAlive.C:
			if w.WriteByte('\n') != nil || w.Flush() != nil {
				return
			}
			keepAlive.Reset(h.cfg.WatchKeepAlive)
		}
	}
}

// changedSince returns the jobs changed after from, in order of their
// change, and the index to continue from. A page never ends inside the
// jobs of one index: a watcher resuming from an index must have seen every
// job of it.
func (h *Handler) changedSince(from uint64) ([]fsm.ChangedJob, uint64) {
	jobs, applied := h.cfg.Dispatcher.JobsChangedSince(from, watchPage)
	if len(jobs) < watchPage {
		return jobs, max(from, applied)
	}
	last := jobs[len(jobs)-1].Changed
	n := len(jobs)
	for n > 0 && jobs[n-1].Changed == last {
		n--
	}
	if n == 0 {
		// One index changed more jobs than a page: take them all.
		jobs, applied = h.cfg.Dispatcher.JobsChangedSince(from, 0)
		return jobs, max(from, applied)
	}
	return jobs[:n], jobs[n-1].Changed
}
