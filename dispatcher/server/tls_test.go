package server_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/internal/porttest"
	"github.com/sluicehq/sluice/internal/tlstest"
)

// TestTLS serves the API over HTTPS: the Go client submits, lists and
// watches through it, and a plain-HTTP or untrusting client gets nothing.
func TestTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "sluice-test CA")
	cert, pool := ca.Cert(t, "127.0.0.1"), ca.Pool()
	addr := porttest.Addrs(t, 1)[0]
	s, err := server.Open(server.Config{
		ID: 1, Peers: map[uint64]string{1: ""}, PeerHTTP: map[uint64]string{1: "https://" + addr},
		Dir: t.TempDir(), HTTPAddr: addr, Dispatcher: testDispatcherConfig(), TickInterval: 20 * time.Millisecond,
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, Logger: testLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if !strings.HasPrefix(s.Addr(), "https://") {
		t.Fatalf("Addr() = %q, want https", s.Addr())
	}
	waitFor(t, 10*time.Second, "a leader", func() bool { _, ok := s.Dispatcher().Leading(); return ok })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	c, err := api.NewClient(api.ClientConfig{Addrs: []string{s.Addr()}, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Submit(ctx, []api.JobSpec{{Name: "tls", Tasks: []api.TaskGroupSpec{{Count: 1, Pod: api.PodSpec{
		Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/img"}, Command: []string{"/w"}, Resources: api.Resources{CPU: 1, Memory: 1024}}},
	}}}}}, api.SubmitOptions{})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("submit over TLS: %+v, %v", res, err)
	}
	l, err := c.Jobs(ctx, api.JobQuery{})
	if err != nil || len(l.Jobs) != 1 || l.Jobs[0].Spec.Name != "tls" {
		t.Fatalf("list over TLS: %+v, %v", l, err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	err = c.Watch(wctx, 0, func(ev api.WatchEvent) error {
		if ev.Job.ID == res.Jobs[0] {
			wcancel()
		}
		return nil
	})
	if wctx.Err() == nil {
		t.Fatalf("watch over TLS ended before the job's event: %v", err)
	}

	// A client that does not trust the certificate, or speaks plain HTTP,
	// gets no answer.
	untrusting, err := api.NewClient(api.ClientConfig{Addrs: []string{s.Addr()}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer untrusting.Close()
	if _, err := untrusting.Jobs(ctx, api.JobQuery{}); err == nil {
		t.Error("a client without the CA listed jobs")
	}
	plain, err := api.NewClient(api.ClientConfig{Addrs: []string{"http://" + addr}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Jobs(ctx, api.JobQuery{}); err == nil {
		t.Error("a plain-HTTP client listed jobs")
	}
}
