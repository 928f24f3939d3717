// Package lint holds the project's lint rules as Go tests, so that `go test
// ./...` enforces them: the layering of packages (DESIGN.md's package table)
// is checked over the real import graph from `go list -deps`.
package lint
