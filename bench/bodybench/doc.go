// Package bodybench measures what hostile request bodies cost a
// dispatcher in memory (`sluice bench bodies`). Each phase starts a fresh
// single-replica dispatcher process (the `dispatcher` command of a sluice
// binary, with a token file), samples its resident memory (VmRSS) every
// 10ms, and applies one load:
//
//   - slow: connections that each declare a body of api.MaxBodyBytes, send
//     64 KiB of it and stall, half without a token and half with an
//     admin's, held for Config.Hold while /healthz is timed;
//   - gzip, zstd: bodies that decompress to 128 MiB of zeros (a gzip bomb
//     of about 130 KB, a zstd one of about 13 KB), all sent at once.
//
// It reports the memory before the load, its peak, and Config.Settle
// after the load ended, and the answers' statuses. The binary is a flag,
// so that a build of another commit can be measured with the same load.
package bodybench
