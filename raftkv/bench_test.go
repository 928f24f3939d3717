package raftkv_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/raftkv"
)

// benchCluster is three replicas on disk (fsync on) over the in-memory
// network (the benchmarks measure the store, not a network), or over TCP on
// loopback with opts' transports.
func benchCluster(b *testing.B, configure func(*raftkv.Config), opts ...clusterOpt) *raftkv.Node {
	b.Helper()
	opts = append(opts, withConfig(func(cfg *raftkv.Config) {
		cfg.TickInterval = 50 * time.Millisecond
		if configure != nil {
			configure(cfg)
		}
	}))
	c := newCluster(b, 3, opts...)
	return c.waitLeader(5 * time.Second)
}

// runWriters proposes b.N commands from w concurrent writers on l and
// reports writes/s, latency percentiles (a dropped proposal is retried
// within its write's latency), and the bytes the process wrote to disk per
// second (all three replicas).
func runWriters(b *testing.B, l *raftkv.Node, w int, cmd func(r *rand.Rand, i int64) []byte) {
	b.Helper()
	var next, dropped atomic.Int64
	lat := make([][]time.Duration, w)
	var wg sync.WaitGroup
	errs := make(chan error, w)
	before := l.Metrics()
	written := diskWriteBytes()
	b.ResetTimer()
	start := time.Now()
	for g := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			ctx := context.Background()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				c := cmd(r, i)
				t0 := time.Now()
				for {
					_, err := l.Propose(ctx, c)
					if errors.Is(err, raftkv.ErrProposalDropped) {
						// The uncommitted log is full (big commands from
						// many writers): back off and retry, as callers do.
						dropped.Add(1)
						time.Sleep(time.Millisecond)
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[min(len(all)-1, int(p*float64(len(all))))]) / 1e6
	}
	m := l.Metrics()
	if w := diskWriteBytes(); w >= 0 && written >= 0 {
		b.ReportMetric(float64(w-written)/elapsed.Seconds()/1e6, "disk-MB/s")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
	if d := dropped.Load(); d > 0 {
		b.ReportMetric(float64(d)/float64(b.N), "retries/op")
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	if ents := m.ProposedEntries - before.ProposedEntries; ents > 0 {
		b.ReportMetric(float64(m.Proposals-before.Proposals)/float64(ents), "cmds/entry")
	}
	if syncs := m.Syncs - before.Syncs; syncs > 0 {
		b.ReportMetric(float64(b.N)/float64(syncs), "cmds/fsync")
	}
}

// BenchmarkWrites: three replicas, fsync on, concurrent writers of 256-byte
// values (etcd's benchmark shape: `benchmark put --val-size 256`).
func BenchmarkWrites(b *testing.B) {
	for _, tc := range []struct {
		writers int
		packed  bool
	}{{1, true}, {16, true}, {64, true}, {256, true}, {256, false}} {
		name := fmt.Sprintf("writers=%d", tc.writers)
		if !tc.packed {
			name += "/one-command-per-entry"
		}
		b.Run(name, func(b *testing.B) {
			l := benchCluster(b, func(cfg *raftkv.Config) {
				if !tc.packed {
					cfg.MaxCommandsPerEntry = 1
				}
			})
			// Values are slices of a random text at random offsets, so that
			// making them costs the benchmark next to nothing.
			text := make([]byte, 1<<16)
			tr := rand.New(rand.NewPCG(3, 4))
			for j := range text {
				text[j] = byte('a' + tr.IntN(26))
			}
			runWriters(b, l, tc.writers, func(r *rand.Rand, i int64) []byte {
				key := fmt.Appendf(nil, "key-%08d", r.IntN(100000))
				off := r.IntN(len(text) - 256)
				return raftkv.PutCommand(key, text[off:off+256])
			})
		})
	}
}

// BenchmarkLargeCommands: commands of 256 KiB (a scheduling round's plan,
// a bulk submit), reporting committed command bytes per second (MB/s).
//   - data: "random" does not compress; "text" is NDJSON job specs, which
//     s2 compresses about 4× (commands of 4 KiB or more are s2-compressed in
//     the log).
//   - sm: "kv" stores every value (so each replica writes each byte twice,
//     log and state, plus flushes and compactions); "digest" stores a
//     checksum of each command, so it measures the log itself: replication,
//     fsync, apply.
//   - net: "mem" is the in-memory network; "tcp" the TCP transport on
//     loopback.
func BenchmarkLargeCommands(b *testing.B) {
	const size = 256 << 10
	for _, sm := range []string{"kv", "digest"} {
		for _, kind := range []string{"random", "text"} {
			for _, writers := range []int{4, 16, 64, 256} {
				for _, net := range []string{"mem", "tcp"} {
					b.Run(fmt.Sprintf("sm=%s/data=%s/writers=%d/net=%s", sm, kind, writers, net), func(b *testing.B) {
						var opts []clusterOpt
						if net == "tcp" {
							opts = append(opts, withTransports(tcpTransports()))
						}
						l := benchCluster(b, func(cfg *raftkv.Config) {
							if sm == "digest" {
								cfg.StateMachine = digestSM{}
							}
						}, opts...)
						payload := make([]byte, size)
						r := rand.New(rand.NewPCG(1, 2))
						if kind == "random" {
							for i := range payload {
								payload[i] = byte(r.Uint32())
							}
						} else {
							payload = jobSpecs(r, size)
						}
						b.SetBytes(size)
						runWriters(b, l, writers, func(_ *rand.Rand, i int64) []byte {
							return raftkv.PutCommand(fmt.Appendf(nil, "blob-%d", i%64), payload)
						})
					})
				}
			}
		}
	}
}

// digestSM applies a command by storing its CRC under one key per writer slot.
type digestSM struct{}

func (digestSM) Apply(b *raftkv.Batch, index uint64, cmd []byte) ([]byte, error) {
	b.Set([]byte("digest"), binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, index), crc32.ChecksumIEEE(cmd)))
	return nil, nil
}

// jobSpecs returns size bytes of NDJSON job specs with varying names,
// counts and resources, as a bulk submit carries.
func jobSpecs(r *rand.Rand, size int) []byte {
	var out []byte
	for len(out) < size {
		out = fmt.Appendf(out, `{"name":"job-%d-%x","queue":"q%d","priority":%d,"tasks":[{"count":%d,"pod":{"containers":[{"image":{"rootfs":"/var/lib/sluice/rootfs/img%d"},"command":["/bin/run","--id=%d"],"resources":{"cpu":"%dm","memory":"%dMi"}}]}}]}`+"\n",
			r.IntN(1e6), r.Uint32(), r.IntN(10), r.IntN(1000), r.IntN(10000), r.IntN(50), r.IntN(1e9), r.IntN(4000), r.IntN(8192))
	}
	return out[:size]
}

// diskWriteBytes returns the bytes this process has caused to be written to
// storage (/proc/self/io), or -1 where that is not available.
func diskWriteBytes() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "write_bytes: "); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}
