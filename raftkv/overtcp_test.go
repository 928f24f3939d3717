package raftkv_test

import (
	"crypto/tls"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/raftkv"
)

// tcpTransports makes real TCP transports on loopback. A replica that
// restarts listens at the address it had (the others know it by that).
func tcpTransports() transportFactory { return tcpTransportsWith(nil) }

// tcpTransportsWith is tcpTransports with each replica's TLS
// configuration from tlsFor (nil: plaintext).
func tcpTransportsWith(tlsFor func(t testing.TB, id uint64) *tls.Config) transportFactory {
	var mu sync.Mutex
	addrs := map[uint64]string{}
	return func(t testing.TB, id uint64) (raftkv.Transport, string) {
		mu.Lock()
		listen := addrs[id]
		mu.Unlock()
		if listen == "" {
			listen = "127.0.0.1:0"
		}
		cfg := raftkv.TCPConfig{ID: id, ListenAddr: listen, Logger: testLogger()}
		if tlsFor != nil {
			cfg.TLS = tlsFor(t, id)
		}
		tr, err := raftkv.NewTCPTransport(cfg)
		if err != nil {
			t.Fatalf("TCP transport for replica %d: %v", id, err)
		}
		mu.Lock()
		addrs[id] = tr.Addr()
		mu.Unlock()
		return tr, tr.Addr()
	}
}

// TestOverTCP runs the cluster scenarios that do not cut links over the TCP
// transport.
func TestOverTCP(t *testing.T) {
	t.Run("three-replicas", func(t *testing.T) { testThreeReplicas(t, withTransports(tcpTransports())) })
	t.Run("leader-killed", func(t *testing.T) { testLeaderKilled(t, withTransports(tcpTransports())) })
	t.Run("membership", func(t *testing.T) { testMembership(t, withTransports(tcpTransports())) })
}
