// Package codecgen writes the codecs of a package's wire types from their Go
// declarations, so that a type's fields are listed in one place: the type.
// It reads the source of the package (go/parser, not reflection, so that
// a stale or broken generated file never stops it), leaving out tests and
// the files it writes (names ending in _gen.go), and writes:
//
//   - JSON decoders and encoders (-json), for package api: decodeT reads
//     an object strictly into a T (unknown and repeated members are
//     problems at their paths, through api's decoder), appendT writes one
//     byte for byte as encoding/json does;
//   - a binary codec (-binary), for package dispatcher/fsm: fields in
//     declaration order without tags, in numbered layouts: a field tagged
//     since=N is in the encodings of layout N on, and the decoders read
//     every layout up to the current one (binGen; package layouttest
//     runs such a codec).
//
// A field's json tag gives its member name and omitempty/omitzero; a codec
// tag gives options (intern, quantity, slab, since; see knownOpts). Strings, typed
// strings, bools, int32, int64, []string, map[string]string, structs of the
// package, pointers to and slices of them are handled by kind; a named leaf
// type by its entry in leafHooks; any other type is an error naming the
// field, never a codec that drops it.
//
// A package runs it with a go:generate directive,
//
//	//go:generate go run github.com/sluicehq/sluice/internal/codecgen/cmd/codecgen <args>
//
// and tests with Check that its generated files are what the directive
// writes now. Run describes the arguments.
package codecgen
