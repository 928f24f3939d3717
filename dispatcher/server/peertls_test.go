package server_test

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/internal/tlstest"
)

// TestPeerTLS runs three replicas whose raft transport is mutual TLS: they
// elect a leader, and a job submitted to it is applied by every replica.
func TestPeerTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "peer CA")
	c := openThree(t, func(_ uint64, cfg *server.Config) { cfg.PeerTLS = tlstest.Config(ca, ca.Cert(t, "127.0.0.1")) })
	servers := c.servers
	leader := c.leader(t, 0)
	res := submit(t, leader.Addr(), "", jobJSON("over-tls", "", 1), nil)
	if len(res.Jobs) != 1 {
		t.Fatalf("submit: %+v", res)
	}
	applied := leader.Raft().Status().Applied
	waitFor(t, 10*time.Second, "every replica to apply the submit", func() bool {
		for _, s := range servers {
			if s.Raft().Status().Applied < applied {
				return false
			}
		}
		return true
	})
}

func TestOpenValidatesPeerTLS(t *testing.T) {
	_, err := server.Open(server.Config{
		ID: 1, Peers: map[uint64]string{1: "127.0.0.1:1", 2: "127.0.0.1:2"}, Dir: t.TempDir(), HTTPAddr: "127.0.0.1:0",
		PeerTLS: &tls.Config{InsecureSkipVerify: true},
	})
	if !errors.Is(err, server.ErrConfig) {
		t.Fatalf("Open = %v, want ErrConfig", err)
	}
	for _, want := range []string{"PeerTLS: no certificate", "PeerTLS: RootCAs", "PeerTLS: InsecureSkipVerify"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
