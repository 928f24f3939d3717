package storebench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/raftkv"
)

// writePeerCerts makes a throwaway CA and one certificate per replica of
// peers, for the host of its address, writes them as PEM files under dir
// (ca.crt, N.crt, N.key) and loads each replica's with raftkv.LoadPeerTLS,
// as a dispatcher loads its --peer-tls-* files. Keys are ECDSA P-256, as
// an operator following the README would make them; the certificates are
// valid for a day.
func writePeerCerts(dir string, peers map[uint64]string) (map[uint64]*tls.Config, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("peer certificates: %w", err)
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("peer certificates: CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sluice bench peer CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("peer certificates: CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("peer certificates: CA: %w", err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := writePEM(caFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	out := make(map[uint64]*tls.Config, len(peers))
	for id, addr := range peers {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("peer certificates: replica %d: %w", id, err)
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("peer certificates: replica %d key: %w", id, err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(id) + 1),
			Subject:      pkix.Name{CommonName: fmt.Sprintf("replica %d", id)},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		if ip := net.ParseIP(host); ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		} else {
			tmpl.DNSNames = []string{host}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, fmt.Errorf("peer certificates: replica %d: %w", id, err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("peer certificates: replica %d key: %w", id, err)
		}
		certFile := filepath.Join(dir, fmt.Sprintf("%d.crt", id))
		keyFile := filepath.Join(dir, fmt.Sprintf("%d.key", id))
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return nil, err
		}
		if err := writePEM(keyFile, "PRIVATE KEY", keyDER); err != nil {
			return nil, err
		}
		if out[id], err = raftkv.LoadPeerTLS(certFile, keyFile, caFile, host); err != nil {
			return nil, fmt.Errorf("peer certificates: replica %d: %w", id, err)
		}
	}
	return out, nil
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("peer certificates: %w", err)
	}
	return nil
}
