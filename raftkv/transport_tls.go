package raftkv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// ErrPeerTLS is returned by LoadPeerTLS for certificates, keys and CAs that
// cannot secure the transport; the error text says which file and why.
var ErrPeerTLS = errors.New("raftkv: peer TLS")

// peerTLSConfigs derives the listener's and the dialer's configurations
// from TCPConfig.TLS (already validated).
func peerTLSConfigs(c *tls.Config) (server, client *tls.Config) {
	server = c.Clone()
	server.MinVersion = tls.VersionTLS13
	server.ClientAuth = tls.RequireAndVerifyClientCert
	if server.ClientCAs == nil {
		server.ClientCAs = server.RootCAs
	}
	// Frames go out in bursts of up to 64 KiB (the peer's buffered
	// writer): full-size records from the first byte cost the fewest
	// seals and headers.
	server.DynamicRecordSizingDisabled = true
	// Dialers keep no session cache (every connection is a full
	// handshake, and connections live long): tickets would be wasted.
	server.SessionTicketsDisabled = true
	client = c.Clone()
	client.MinVersion = tls.VersionTLS13
	client.DynamicRecordSizingDisabled = true
	return server, client
}

// tcpTLSConn is a TLS connection whose Close closes the TCP connection at
// once, without the close_notify alert, which tls.Conn.Close may wait up
// to 5 s to write. The wire format marks its own ends (frames and the
// snapshot carry their lengths and checksums, a snapshot ends with a
// reply), so a cut-off connection is never mistaken for a complete one.
type tcpTLSConn struct {
	*tls.Conn
	raw net.Conn
}

func (c tcpTLSConn) Close() error { return c.raw.Close() }

// serverHandshake runs the TLS handshake of an inbound connection, within
// the deadline already set on conn.
func (t *TCPTransport) serverHandshake(conn net.Conn) (net.Conn, error) {
	tc := tls.Server(conn, t.serverTLS)
	if err := tc.HandshakeContext(t.ctx); err != nil {
		t.stats.tlsHandshakeFailures.Add(1)
		return nil, err
	}
	return tcpTLSConn{Conn: tc, raw: conn}, nil
}

// clientHandshake runs the TLS handshake of a connection dialled to peer
// id at addr, within the deadline already set on conn, verifying the
// peer's certificate against the cluster CA and the host of addr.
func (t *TCPTransport) clientHandshake(ctx context.Context, conn net.Conn, id uint64, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	cfg := t.clientTLS.Clone()
	cfg.ServerName = host
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		t.stats.tlsHandshakeFailures.Add(1)
		return nil, fmt.Errorf("raftkv: TLS handshake with peer %d at %s: %w", id, addr, err)
	}
	return tcpTLSConn{Conn: tc, raw: conn}, nil
}

// LoadPeerTLS reads a replica's certificate chain and key (PEM, as
// tls.LoadX509KeyPair reads them) and the cluster CA (PEM, one or more
// certificates) and returns a configuration for TCPConfig.TLS. It checks
// what would otherwise fail only when peers connect: that the key matches
// the certificate, that the certificate is valid now and chains to the CA
// for both server and client authentication, and, when host is not empty,
// that it is valid for host (the host of the replica's own peer address).
// Its errors match ErrPeerTLS.
func LoadPeerTLS(certFile, keyFile, caFile, host string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate %s and key %s: %w", ErrPeerTLS, certFile, keyFile, err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: CA: %w", ErrPeerTLS, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: CA %s: no PEM certificate in it", ErrPeerTLS, caFile)
	}
	if err := checkPeerCert(cert, roots, host, time.Now()); err != nil {
		return nil, fmt.Errorf("%w: certificate %s: %w", ErrPeerTLS, certFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS13}, nil
}

// checkPeerCert checks that cert's leaf chains to roots at now for both
// server and client authentication and, when host is not empty, that it is
// valid for host.
func checkPeerCert(cert tls.Certificate, roots *x509.CertPool, host string, now time.Time) error {
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return err
		}
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("intermediate certificate: %w", err)
		}
		inter.AddCert(c)
	}
	for _, use := range []struct {
		usage x509.ExtKeyUsage
		name  string
	}{{x509.ExtKeyUsageServerAuth, "server"}, {x509.ExtKeyUsageClientAuth, "client"}} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{use.usage}})
		if err != nil {
			return fmt.Errorf("not valid against the CA as a %s certificate (a peer is both): %w", use.name, err)
		}
	}
	if host != "" {
		if err := leaf.VerifyHostname(host); err != nil {
			return fmt.Errorf("not valid for this replica's peer host: %w", err)
		}
	}
	return nil
}
