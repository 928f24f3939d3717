// Package metrics defines a nodelet's Prometheus metrics and writes them
// in Prometheus' text format, for its log server's /metrics.
//
// What the agent and its overcommit loop already count (pods by state
// and tier, starts and their failures by reason, stops and kills by
// reason, reports, the tiers' use and the offline tier's limits) is read
// at scrape time by a prometheus.Collector; only latencies are observed
// as they happen, through nodelet.Observer (Metrics implements it). Label
// values are bounded: tiers, states and reasons, never a pod or task ID.
//
// Usage:
//
//	m := metrics.New(metrics.Config{Process: true})
//	cfg.Observer = m // nodelet.Config
//	a, _ := nodelet.New(cfg)
//	m.Attach(a)
//	var buf bytes.Buffer
//	_ = m.Write(&buf) // the body of GET /metrics
package metrics
