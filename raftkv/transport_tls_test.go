package raftkv_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/tlstest"
	"github.com/sluicehq/sluice/raftkv"
	"go.etcd.io/raft/v3/raftpb"
)

// tlsTransports makes TCP transports on loopback with mutual TLS: each
// replica presents the certificate certFor gives it and trusts ca.
func tlsTransports(ca *tlstest.CA, certFor func(t testing.TB, id uint64) tls.Certificate) transportFactory {
	return tcpTransportsWith(func(t testing.TB, id uint64) *tls.Config { return tlstest.Config(ca, certFor(t, id)) })
}

// TestOverTLS runs cluster scenarios over mutually authenticated TLS:
// election and commits, and a replica that joins from a snapshot.
func TestOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	good := func(t testing.TB, _ uint64) tls.Certificate { return ca.Cert(t, "127.0.0.1") }
	t.Run("three-replicas", func(t *testing.T) { testThreeReplicas(t, withTransports(tlsTransports(ca, good))) })
	t.Run("membership", func(t *testing.T) { testMembership(t, withTransports(tlsTransports(ca, good))) })
}

// TestOverTLSForeignReplicaCannotJoin adds a replica whose certificate
// another CA signed: the members refuse every connection it makes and it
// refuses theirs, so it never receives a snapshot or an entry, and no
// member's raft hears from it.
func TestOverTLSForeignReplicaCannotJoin(t *testing.T) {
	ca, other := tlstest.NewCA(t, "cluster CA"), tlstest.NewCA(t, "other CA")
	var mu sync.Mutex
	trs := map[uint64]*raftkv.TCPTransport{}
	factory := tlsTransports(ca, func(t testing.TB, id uint64) tls.Certificate {
		if id == 4 {
			return other.Cert(t, "127.0.0.1")
		}
		return ca.Cert(t, "127.0.0.1")
	})
	record := func(t testing.TB, id uint64) (raftkv.Transport, string) {
		tr, addr := factory(t, id)
		mu.Lock()
		trs[id] = tr.(*raftkv.TCPTransport)
		mu.Unlock()
		return tr, addr
	}
	c := newCluster(t, 3, withTransports(record))
	ctx := ctxTimeout(t, 20*time.Second)
	if _, err := c.propose(ctx, raftkv.PutCommand([]byte("k"), []byte("v"))); err != nil {
		t.Fatalf("put: %v", err)
	}
	n4, addr4 := c.join(4)
	if err := c.onLeader(ctx, func(l *raftkv.Node) error { return l.AddMember(ctx, raftkv.Member{ID: 4, Addr: addr4, Learner: true}) }); err != nil {
		t.Fatalf("add learner 4: %v", err)
	}
	l := c.waitLeader(time.Second)
	mu.Lock()
	lt, t4 := trs[l.Status().ID], trs[4]
	mu.Unlock()
	// The leader dials 4 (and 4 refuses it, or it refuses 4's server
	// certificate) again and again; 4 dials nobody it can reach.
	tcpWaitFor(t, "the leader's dials to 4 to fail three times", func() bool {
		return lt.Stats().TLSHandshakeFailures+t4.Stats().TLSHandshakeFailures >= 3
	})
	if s := n4.Status(); s.Applied != 0 || s.Term != 0 {
		t.Errorf("foreign replica took in the cluster's state: %+v", s)
	}
	if s := t4.Stats(); s.MessagesReceived != 0 {
		t.Errorf("foreign replica received %d messages", s.MessagesReceived)
	}
	for id, tr := range trs {
		if s := tr.Stats(); id != 4 && s.HandshakesRejected != 0 {
			t.Errorf("replica %d: a hello came through TLS from the foreign replica: %+v", id, s)
		}
	}
}

// tlsPair is two started TLS transports, 1 and 2, that know each other.
func tlsPair(t *testing.T, ca *tlstest.CA, tweak func(*raftkv.TCPConfig)) (a, b *tcpNode) {
	t.Helper()
	cfgFor := func(c *raftkv.TCPConfig) {
		c.TLS = tlstest.Config(ca, ca.Cert(t, "127.0.0.1"))
		if tweak != nil {
			tweak(c)
		}
	}
	nodes := newTCPCluster(t, 2, cfgFor)
	return nodes[0], nodes[1]
}

func TestTCPTransportTLSExchange(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	a, b := tlsPair(t, ca, nil)
	big := tcpRandomBytes(1, 300<<10)
	a.tr.Send([]*raftpb.Message{tcpApp(1, 2, 1, []byte("x"), big), tcpSnap(1, 2, 9, big)})
	b.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgAppResp, 2, 1, 2)})
	tcpWaitFor(t, "1 → 2 and 2 → 1", func() bool {
		return len(b.rec.received(1)) == 2 && len(a.rec.received(2)) == 1
	})
	for _, m := range b.rec.received(1) {
		switch m.GetType() {
		case raftpb.MsgApp:
			if got := m.GetEntries()[1].GetData(); string(got) != string(big) {
				t.Errorf("entry of %d bytes arrived as %d bytes", len(big), len(got))
			}
		case raftpb.MsgSnap:
			if got := m.GetSnapshot().GetData(); string(got) != string(big) {
				t.Errorf("snapshot of %d bytes arrived as %d bytes", len(big), len(got))
			}
		}
	}
	if s := a.tr.Stats(); s.TLSHandshakeFailures != 0 || s.DialFailures != 0 {
		t.Errorf("stats of a clean exchange: %+v", s)
	}
}

// TestTCPTransportTLSRefusals speaks to a TLS transport as a plaintext
// transport, a raw plaintext client, a TLS client without a certificate,
// a transport whose certificate another CA signed, and a client that says
// nothing: each is cut off before its hello is read, counted, and nothing
// of what it sends reaches the Handler.
func TestTCPTransportTLSRefusals(t *testing.T) {
	ca, other := tlstest.NewCA(t, "cluster CA"), tlstest.NewCA(t, "other CA")
	a := newTCPNode(t, 1, func(c *raftkv.TCPConfig) {
		c.TLS = tlstest.Config(ca, ca.Cert(t, "127.0.0.1"))
		c.DialTimeout = 300 * time.Millisecond
	})
	a.start(t)
	failures := func() uint64 { return a.tr.Stats().TLSHandshakeFailures }
	hello := raftkv.TCPTestHello(raftkv.TCPTestProtocolVersion, raftkv.TCPTestKindStream, 0, 2, 1)
	frame := raftkv.TCPTestFrame(tcpMsg(raftpb.MsgApp, 2, 1, 1))

	// expectCut reads from conn until it ends, which must be within 5 s
	// and without a reply.
	expectCut := func(t *testing.T, conn net.Conn) {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		ok, reason, err := raftkv.TCPTestReadReply(conn)
		if err == nil {
			t.Fatalf("got a reply (accepted %v, %q)", ok, reason)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open after 5 s: %v", err)
		}
	}

	t.Run("plaintext-transport", func(t *testing.T) {
		before := failures()
		p := newTCPNode(t, 2, func(c *raftkv.TCPConfig) { c.Peers = map[uint64]string{1: a.tr.Addr()} })
		p.start(t)
		p.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgApp, 2, 1, 1)})
		tcpWaitFor(t, "the plaintext dial to fail", func() bool { return p.tr.Stats().DialFailures > 0 && failures() > before })
	})

	t.Run("plaintext-client", func(t *testing.T) {
		before := failures()
		conn, err := net.Dial("tcp", a.tr.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.Write(append(append([]byte(nil), hello...), frame...))
		expectCut(t, conn)
		tcpWaitFor(t, "the refusal to be counted", func() bool { return failures() > before })
	})

	t.Run("no-client-certificate", func(t *testing.T) {
		before := failures()
		conn, err := tls.Dial("tcp", a.tr.Addr(), &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
		if err != nil {
			// The server may refuse before the client's Dial returns.
			t.Logf("dial: %v", err)
		} else {
			defer conn.Close()
			// In TLS 1.3 the client finishes first: the refusal comes
			// as an alert on the first read.
			conn.Write(append(append([]byte(nil), hello...), frame...))
			expectCut(t, conn)
		}
		tcpWaitFor(t, "the refusal to be counted", func() bool { return failures() > before })
	})

	t.Run("foreign-CA-client", func(t *testing.T) {
		before := failures()
		// It trusts the cluster CA, so only a's check of its certificate
		// can stop it.
		conn, err := tls.Dial("tcp", a.tr.Addr(), &tls.Config{
			Certificates: []tls.Certificate{other.Cert(t, "127.0.0.1")},
			RootCAs:      ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
		})
		if err != nil {
			t.Logf("dial: %v", err)
		} else {
			defer conn.Close()
			conn.Write(append(append([]byte(nil), hello...), frame...))
			expectCut(t, conn)
		}
		tcpWaitFor(t, "the refusal to be counted", func() bool { return failures() > before })
	})

	t.Run("foreign-CA-transport", func(t *testing.T) {
		before := failures()
		f := newTCPNode(t, 2, func(c *raftkv.TCPConfig) {
			c.TLS = tlstest.Config(ca, other.Cert(t, "127.0.0.1"))
			c.Peers = map[uint64]string{1: a.tr.Addr()}
		})
		f.start(t)
		f.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgApp, 2, 1, 1)})
		tcpWaitFor(t, "the dial to fail on both sides", func() bool { return f.tr.Stats().DialFailures > 0 && failures() > before })
	})

	t.Run("silent-client", func(t *testing.T) {
		before := failures()
		conn, err := net.Dial("tcp", a.tr.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		expectCut(t, conn)
		if took := time.Since(start); took < 200*time.Millisecond {
			t.Errorf("cut after %v, before DialTimeout", took)
		}
		tcpWaitFor(t, "the timeout to be counted", func() bool { return failures() > before })
	})

	if got := a.rec.received(0); len(got) != 0 {
		t.Fatalf("the Handler received %d messages from refused connections", len(got))
	}
	if s := a.tr.Stats(); s.ProtocolErrors != 0 || s.HandshakesRejected != 0 || s.FramesReceived != 0 {
		t.Errorf("a refused connection got past TLS: %+v", s)
	}
}

// TestTCPTransportTLSCloseDuringHandshake closes a transport while a
// dialer holds its TLS handshake open (it stalls when asked for its
// certificate): Close does not wait for the handshake's deadline.
func TestTCPTransportTLSCloseDuringHandshake(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	cfg := raftkv.TCPConfig{ID: 1, ListenAddr: "127.0.0.1:0", DialTimeout: time.Minute, TLS: tlstest.Config(ca, ca.Cert(t, "127.0.0.1"))}
	tr, err := raftkv.NewTCPTransport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := newTCPRecorder()
	if err := tr.Start(rec); err != nil {
		t.Fatal(err)
	}
	cert := ca.Cert(t, "127.0.0.1")
	asked, release, dialed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(dialed)
		conn, err := tls.Dial("tcp", tr.Addr(), &tls.Config{
			RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				close(asked)
				<-release
				return &cert, nil
			},
		})
		if err == nil {
			conn.Close()
		}
	}()
	defer func() { <-dialed }()
	defer close(release)
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener never asked for a client certificate")
	}
	start := time.Now()
	if err := tr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %v with a handshake in progress", took)
	}
	if got := rec.received(0); len(got) != 0 {
		t.Fatalf("received %d messages", len(got))
	}
}

// TestTCPTransportTLSServerName shows that a dialer checks the listener's
// certificate against the host it dials: a certificate of the cluster CA
// for another host does not do.
func TestTCPTransportTLSServerName(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	b := newTCPNode(t, 2, func(c *raftkv.TCPConfig) { c.TLS = tlstest.Config(ca, ca.Cert(t, "127.0.0.2", "peer2.example")) })
	b.start(t)
	logs := &tcpLogBuffer{}
	a := newTCPNode(t, 1, func(c *raftkv.TCPConfig) {
		c.TLS = tlstest.Config(ca, ca.Cert(t, "127.0.0.1"))
		c.Peers = map[uint64]string{2: b.tr.Addr()}
		c.Logger = slogTo(logs)
	})
	a.start(t)
	a.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgApp, 1, 2, 1)})
	// The failure is counted before it is logged: wait for both.
	tcpWaitFor(t, "the dial to fail, saying why", func() bool {
		return a.tr.Stats().TLSHandshakeFailures > 0 && strings.Contains(logs.String(), "certificate is valid for 127.0.0.2")
	})
	if !strings.Contains(logs.String(), "127.0.0.1") {
		t.Errorf("log does not name the host dialled:\n%s", logs)
	}
	if got := b.rec.received(0); len(got) != 0 {
		t.Fatalf("delivered %d messages over a connection to the wrong host", len(got))
	}
}

func TestTCPConfigValidateTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	cases := []struct {
		name string
		tls  *tls.Config
		want string
	}{
		{"no certificate", &tls.Config{RootCAs: ca.Pool()}, "no certificate"},
		{"no CA", &tls.Config{Certificates: []tls.Certificate{ca.Cert(t, "127.0.0.1")}}, "RootCAs"},
		{"insecure", &tls.Config{Certificates: []tls.Certificate{ca.Cert(t, "127.0.0.1")}, RootCAs: ca.Pool(), InsecureSkipVerify: true}, "InsecureSkipVerify"},
		{"TLS 1.2", &tls.Config{Certificates: []tls.Certificate{ca.Cert(t, "127.0.0.1")}, RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS12}, "MaxVersion TLS 1.2"},
	}
	for _, tc := range cases {
		err := raftkv.TCPConfig{ID: 1, ListenAddr: "127.0.0.1:0", TLS: tc.tls}.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if err := (raftkv.TCPConfig{ID: 1, ListenAddr: "127.0.0.1:0", TLS: tlstest.Config(ca, ca.Cert(t, "127.0.0.1"))}).Validate(); err != nil {
		t.Errorf("valid TLS config: %v", err)
	}
}

func TestLoadPeerTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := tlstest.NewCA(t, "cluster CA"), tlstest.NewCA(t, "other CA")
	caFile := ca.WriteCA(t, dir, "ca")
	goodCert, goodKey := tlstest.WriteCert(t, dir, "good", ca.Cert(t, "127.0.0.1", "peer1.example"))
	_, otherKey := tlstest.WriteCert(t, dir, "other-key", ca.Cert(t, "127.0.0.1"))
	foreignCert, foreignKey := tlstest.WriteCert(t, dir, "foreign", other.Cert(t, "127.0.0.1"))
	expiredCert, expiredKey := tlstest.WriteCert(t, dir, "expired", ca.CertWith(t, func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)
	}, "127.0.0.1"))
	serverOnlyCert, serverOnlyKey := tlstest.WriteCert(t, dir, "server-only", ca.CertWith(t, func(c *x509.Certificate) {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}, "127.0.0.1"))
	notPEM := dir + "/not-pem"
	if err := writeFile(notPEM, "not a certificate"); err != nil {
		t.Fatal(err)
	}

	cfg, err := raftkv.LoadPeerTLS(goodCert, goodKey, caFile, "peer1.example")
	if err != nil {
		t.Fatalf("good files: %v", err)
	}
	if err := (raftkv.TCPConfig{ID: 1, ListenAddr: "127.0.0.1:0", TLS: cfg}).Validate(); err != nil {
		t.Errorf("loaded config does not validate: %v", err)
	}
	if _, err := raftkv.LoadPeerTLS(goodCert, goodKey, caFile, ""); err != nil {
		t.Errorf("good files, no host: %v", err)
	}

	for _, tc := range []struct {
		name                  string
		cert, key, ca, host   string
		wantFile, wantMessage string
	}{
		{"missing cert", dir + "/nope.crt", goodKey, caFile, "", "nope.crt", "no such file"},
		{"key of another cert", goodCert, otherKey, caFile, "", "good.crt", "private key does not match"},
		{"missing CA", goodCert, goodKey, dir + "/nope-ca.crt", "", "nope-ca.crt", "no such file"},
		{"CA not PEM", goodCert, goodKey, notPEM, "", "not-pem", "no PEM certificate"},
		{"other CA", foreignCert, foreignKey, caFile, "", "foreign.crt", "unknown authority"},
		{"expired", expiredCert, expiredKey, caFile, "", "expired.crt", "expired"},
		{"server only", serverOnlyCert, serverOnlyKey, caFile, "", "server-only.crt", "as a client certificate"},
		{"other host", goodCert, goodKey, caFile, "10.9.9.9", "good.crt", "not valid for this replica's peer host"},
	} {
		_, err := raftkv.LoadPeerTLS(tc.cert, tc.key, tc.ca, tc.host)
		if !errors.Is(err, raftkv.ErrPeerTLS) || !strings.Contains(err.Error(), tc.wantFile) || !strings.Contains(err.Error(), tc.wantMessage) {
			t.Errorf("%s: got %v, want ErrPeerTLS naming %q and saying %q", tc.name, err, tc.wantFile, tc.wantMessage)
		}
	}
}

func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func writeFile(path, data string) error { return os.WriteFile(path, []byte(data), 0o600) }
