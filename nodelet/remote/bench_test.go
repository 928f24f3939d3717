package remote_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/remote"
)

// BenchmarkReport sends batches of 16 task reports, the size of a busy
// node's, through Dispatcher.Report to a fasthttp server on loopback that
// answers 204 without reading them: the nodelet's side of a report, its
// conversion, encoding and exchange. Allocations count both sides.
func BenchmarkReport(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(fasthttp.StatusNoContent) }}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	const name = "n1"
	d := newDispatcher(b, newClient(b, "http://"+ln.Addr().String(), ""), name)
	now := time.Now()
	reports := make([]nodelet.PodReport, 16)
	for i := range reports {
		task := fmt.Sprintf("j%d/0/%d/0", i/4, i)
		reports[i] = nodelet.PodReport{PodID: remote.PodID(task),
			TaskReport: api.TaskReport{TaskID: task, State: api.TaskSucceeded, Reason: api.ReasonExited, Time: now}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Report(ctx, name, reports); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N*len(reports)), "ns/report")
}
