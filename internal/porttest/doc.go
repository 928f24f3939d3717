// Package porttest finds free TCP ports on loopback for tests that start
// servers at addresses they must know in advance (raft peers, replicas
// started as processes). The ports are free when returned; a test that
// can listen on port 0 itself should.
package porttest
