// Package remotetest is a stub of the dispatcher's HTTP API for tests of
// nodelets: node registration, target long-polls and reports (with
// heartbeats' usage), as
// api/wire.go describes them, served over loopback with fasthttp and
// driven by the test (SetTarget, Forget) and inspected by it (Node,
// Reports, Usages, Await).
//
// # Usage
//
//	d := remotetest.Start(t, "")
//	... start a nodelet against d.URL ...
//	d.Await(t, 10*time.Second, "registration", func() bool { _, ok := d.Node("n1"); return ok })
//	d.SetTarget("n1", pods...)
package remotetest
