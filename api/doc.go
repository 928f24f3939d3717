// Package api holds the wire types every Sluice component shares — job, task
// group, pod, container, capbox, node and task-report types — with their JSON
// decoding and validation, the task and capbox state machines as data, the
// documented limits of a request, the HTTP API's paths and bodies (wire.go),
// the Go client of that API (Client), and what a server of it wraps its
// listener in (listener.go): KeepAccepting rides out accept errors, and a
// ConnLimit bounds the connections open so that a server out of
// descriptors never comes about.
//
// # The client
//
// Client speaks the dispatcher's HTTP API: it sends each request to the
// replica it last found leading, follows a follower's redirect to the
// leader (re-sending the body; its idle connections to the other replicas
// are closed then, not left to time out), and moves to the next replica
// when one cannot be connected to, answers 503 not_leader (it did
// nothing: no leader known, or the replica has stopped), or, for a
// request safe to repeat, answers any other 5xx, drops the connection or
// times out. When every replica failed so, it pauses (exponential backoff
// with seeded jitter) and goes over them again, a few rounds at most. A
// request that is not safe to repeat (a submit without idempotency keys,
// capbox requests without keys) is never sent again once a replica may
// have received it: the error wraps ErrOutcomeUnknown, and callers retry
// submits with an idempotency key (SubmitOptions.IdempotencyKey), which
// makes the retry safe. Client's doc lists which requests are safe to
// repeat. Every error reply is an *APIError carrying the server's
// ErrorResponse.
//
// # Decoding
//
// DecodeJobs, DecodeCapboxRequests and DecodeCapTasks read a request body
// that is one object, a JSON array, or NDJSON (one object per line). They
// are strict: unknown fields, duplicate keys, wrong types, numbers out of
// range, invalid UTF-8 and trailing data are all problems. They apply
// defaults, validate every item, and report every problem at once, each
// with the index of its item and the path of its value:
//
//	jobs[3].tasks[0].pod.containers[1].resources.memory: must be positive
//
// JobArena.DecodeUnvalidated reads jobs the same way but only applies
// defaults, for a caller that validates them anyway (the dispatcher's
// submit does, before it proposes anything), into memory it reuses from
// one body to the next.
//
// The decoder is code for this schema (no reflection) because submission
// throughput is bounded by it: for job specs and the types they contain it
// is generated from the Go types (see Generated codecs); a round-trip test
// against encoding/json keeps it in step with the struct tags.
// DecodeNodeTarget reads a node's target (the reply a nodelet reads on every
// change of its pods) and DecodeReportRequest a node's heartbeat with the
// same decoder and the same strictness, without defaults or validation
// (the dispatcher wrote the one; ReportRequest.Validate checks the other).
// DecodeWatchEvent reads a line of the watch stream (Client.Watch) with
// the same decoder, skipping members it does not know, as a client must
// with a newer server; it is about 4× encoding/json's speed there.
// DecodeTaskList reads a page of a job's tasks (Client.Tasks) the same
// lenient way. AppendNodeTarget, AppendReportRequest, AppendWatchEvent and
// AppendTaskList write those bodies without reflection, byte for byte as
// encoding/json does (a test compares them on random values), 4–8×
// faster.
//
// # Generated codecs
//
// The JSON decoders (decodeT) of JobSpec, CapTaskSpec and CapboxRequest
// and the encoders (appendT) of JobSpec and PodSpec, with those of the
// struct types they reach, are written by internal/codecgen into
// spec_json_gen.go, from the fields' types and tags; the go:generate
// directive at the end of this file runs it, and
// TestGeneratedCodecsCurrent fails while its output differs from the file.
// A field's json tag gives its member name, omitempty and omitzero, as
// encoding/json reads them; a codec tag adds what the decoder does beyond
// reading the type:
//
//	codec:"intern=A|B"        return the constant among A, B equal to the string read
//	codec:"quantity=ParseCPU" an integer may also be a quantity string, parsed so
//	codec:"slab=groups"       carve a slice's elements from the decoder's slab
//	codec:"since=2"           the binary codec's layouts before 2 lack the field
//
// Strings, typed strings, bools, int32 and int64, []string,
// map[string]string, structs of the package, pointers to them and slices
// of them are read and written by kind; a named leaf type (Duration) by
// the hooks the generator's table names for it (d.duration,
// appendDuration). The generated decoders refuse unknown and repeated
// members with their paths, as the rest of the decoder does.
//
// To add a field to one of these types: declare it with its json tag (and
// a codec tag if it needs one), validate it in validate.go, and run
// go generate ./api. The dispatcher's binary spec codec is generated from
// the same types, and the logs of the releases before must still decode:
// a field of a type a JobSpec holds is also tagged codec:"since=N", N one
// past the binary codec's current layout, before go generate
// ./dispatcher/fsm (dispatcher/fsm/spec_codec.go says why and the rest).
// The JSON codec ignores since. The round-trip tests' random values set
// every field (TestEveryFieldDecoded fails until they set the new one).
//
// # Invariants
//
//   - A request is all or nothing: the decoders return every item or none.
//   - Every rejection is a *ValidationError (wrapping ErrInvalid) with at
//     least one Problem, or an error wrapping ErrTooLarge naming the limit.
//   - Decoded strings without escapes share one copy of the request body.
//   - The state machines allow exactly the transitions of DESIGN.md; every
//     state change elsewhere goes through CheckTaskTransition or
//     CheckCapboxTransition.
//
// # Usage
//
//	jobs, err := api.DecodeJobs(body)
//	var ve *api.ValidationError
//	switch {
//	case errors.As(err, &ve):
//		// 400: report ve.Problems
//	case errors.Is(err, api.ErrTooLarge):
//		// 413
//	}
package api

//go:generate go run github.com/sluicehq/sluice/internal/codecgen/cmd/codecgen -json -decode JobSpec,CapTaskSpec,CapboxRequest -encode JobSpec,PodSpec -o spec_json_gen.go
