package fsm

import (
	"testing"

	"github.com/sluicehq/sluice/api"
)

// BenchmarkSpecCodec measures the binary spec codec alone, per spec, on
// the specs of BenchmarkSubmit: appendSpec, and decodeInto with one
// specDecoder for the thousand (as Load reads a command's).
func BenchmarkSpecCodec(b *testing.B) {
	specs := benchSpecs(1000, true)
	var e enc
	for i := range specs {
		appendSpec(&e, &specs[i])
	}
	b.Run("encode", func(b *testing.B) {
		var e enc
		for b.Loop() {
			e.b = e.b[:0]
			for i := range specs {
				appendSpec(&e, &specs[i])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(specs)), "ns/spec")
	})
	b.Run("decode", func(b *testing.B) {
		out := make([]api.JobSpec, len(specs))
		for b.Loop() {
			sd := newSpecDecoder(len(specs))
			d := sharedDec(e.b)
			for i := range out {
				out[i] = api.JobSpec{}
				sd.decodeInto(&d, &out[i])
			}
			if d.err != nil || len(d.b) != 0 {
				b.Fatalf("decode: %v, %d bytes left", d.err, len(d.b))
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(specs)), "ns/spec")
	})
}
