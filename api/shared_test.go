package api

import (
	"bytes"
	"reflect"
	"testing"
)

// TestDecodeJobsCopiesBody checks the two decoders' contracts with the
// body: DecodeJobs's jobs keep their strings when the body is overwritten
// afterwards (they share a copy), and JobArena.DecodeUnvalidated, which
// shares the body itself, reads the same jobs from it.
func TestDecodeJobsCopiesBody(t *testing.T) {
	body := []byte(`[{"name":"alpha","queue":"q1","tasks":[{"count":2,"pod":{"containers":[{"image":{"rootfs":"/img"},"command":["/bin/work","x"],"resources":{"cpu":"100m","memory":"64Mi"}}]}}]},` +
		`{"name":"beta","tasks":[{"count":1,"pod":{"containers":[{"image":{"rootfs":"/img"},"command":["/bin/b"],"resources":{"cpu":1,"memory":"1Gi"}}]}}]}]`)
	want, err := DecodeJobs(bytes.Clone(body))
	if err != nil {
		t.Fatal(err)
	}
	scratch := bytes.Clone(body)
	copied, err := DecodeJobs(scratch)
	if err != nil {
		t.Fatal(err)
	}
	for i := range scratch {
		scratch[i] = 'X'
	}
	if !reflect.DeepEqual(copied, want) {
		t.Fatalf("DecodeJobs's jobs changed with the body:\n got %+v\nwant %+v", copied, want)
	}
	shared, err := new(JobArena).DecodeUnvalidated(bytes.Clone(body))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(shared, want) {
		t.Fatalf("DecodeUnvalidated read\n%+v\nwant %+v", shared, want)
	}
}
