package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
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

// BenchmarkTargetDiff long-polls a fasthttp server on loopback that answers
// every poll with a difference, as a busy node gets them: 32 pods added and
// the 32 added two generations before removed. It measures the nodelet's
// side of a target: the exchange, decoding, holding the target and handing
// the difference to the agent. The server writes prepared text.
func BenchmarkTargetDiff(b *testing.B) {
	const perGen = 32
	// The target of generation g holds batches g%3 and (g-1)%3; the step
	// to g+1 adds batch (g+1)%3 and removes batch (g+2)%3.
	var pods, removed [3][]byte
	whole := api.NodeTarget{Generation: 1}
	for k := range 3 {
		var ps []api.TargetPod
		var ids []string
		for i := range perGen {
			task := fmt.Sprintf("j%d/0/%d/1", 100+k, i)
			ps, ids = append(ps, simPod(task, api.QoSOffline, time.Second, 0)), append(ids, task)
		}
		pods[k] = api.AppendNodeTarget(nil, &api.NodeTarget{Pods: ps})
		removed[k], _ = json.Marshal(ids)
		if k < 2 {
			whole.Pods = append(whole.Pods, ps...)
		}
	}
	wholeBody := api.AppendNodeTarget(nil, &whole)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		args := ctx.QueryArgs()
		gen, err := strconv.ParseUint(string(args.Peek("generation")), 10, 64)
		ctx.SetContentType("application/json")
		if err != nil || string(args.Peek("diff")) != "1" {
			ctx.SetBody(wholeBody)
			return
		}
		// The pods' array, cut out of a target holding only them.
		ps := pods[(gen+1)%3]
		ps = ps[bytes.IndexByte(ps, '[') : bytes.LastIndexByte(ps, ']')+1]
		ctx.SetBody(fmt.Appendf(nil, `{"generation":%d,"base":%d,"pods":%s,"removed":%s}`, gen+1, gen, ps, removed[(gen+2)%3]))
	}}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	const name = "n1"
	d := newDispatcher(b, newClient(b, "http://"+ln.Addr().String(), ""), name)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t, err := d.Target(ctx, name, 0)
	if err != nil || len(t.Pods) != 2*perGen {
		b.Fatalf("whole target: %d pods, %v", len(t.Pods), err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if t, err = d.Target(ctx, name, t.Generation); err != nil || t.Base == 0 || len(t.Pods) != perGen || len(t.Removed) != perGen {
			b.Fatalf("difference: base %d, %d pods, %d removed, %v", t.Base, len(t.Pods), len(t.Removed), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N*perGen), "ns/pod")
}
