// Package metrics defines a dispatcher replica's Prometheus metrics and
// writes them in Prometheus' text format for the HTTP API's /metrics.
//
// It owns no state of the replica's: what already has a counter or a
// gauge somewhere (the dispatcher's round totals, raftkv's status,
// counters, sync latencies and pebble's metrics, the FSM's jobs, tasks
// and nodes) is read when a scrape asks, by a prometheus.Collector; only
// what has no such source is observed as it happens: each round's times
// and sizes (ObserveRound, given to dispatcher.Config.OnRound) and each
// API request (Request, by the HTTP server). Label values are bounded:
// routes, status codes, queues, QoS classes and states, never a job, task
// or node name.
//
// Usage:
//
//	m, _ := metrics.New(metrics.Config{Routes: routes})
//	dcfg.OnRound = m.ObserveRound
//	d, _ := dispatcher.New(dcfg)
//	m.Attach(d, f, raft)
//	var buf bytes.Buffer
//	_ = m.Write(&buf) // the body of GET /metrics
package metrics
