// Package tlstest makes certificate authorities and certificates for tests
// of TLS between Sluice's parts: an in-memory CA (ECDSA P-256) that issues
// leaf certificates for loopback hosts, usable both as server and client
// certificates, and writes them as PEM files where a test needs them on
// disk.
package tlstest
