// Package promtest reads Prometheus metrics in tests: it parses the text
// format with the client's own parser, lints it as promtool does, and
// finds a metric's value by its labels. It imports nothing of ours.
package promtest
