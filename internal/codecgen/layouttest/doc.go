// Package layouttest runs a binary codec that codecgen generates
// (layout_gen.go, from the types of package schema), so that its tests
// can check what the generator's text tests cannot: that each layout's
// encodings decode as written, with the fields of later layouts zero; that
// layout 0 goes to the hand-written legacy decoder; and that the skimmer
// reads what the decoder reads. It holds the primitives the generated code
// calls, as dispatcher/fsm does, and nothing else uses it.
package layouttest

//go:generate go run github.com/sluicehq/sluice/internal/codecgen/cmd/codecgen -binary -schema schema -import github.com/sluicehq/sluice/internal/codecgen/layouttest/schema -type Job,Pod -legacy Pod=1 -skimmer Job -read Job.Count -o layout_gen.go
