package server

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Job tokens are the credentials of appmasters that run in the cluster: the
// pods of an appmaster job's own task groups get their job's token
// (api.EnvToken, delivered in their node's target), which acts for that job
// alone (RoleJob) and only while it has not ended.
//
// A token is not stored anywhere: it is derived from a key every replica
// has from its configuration (JobKeys) and from facts of the job that every
// replica's state machine holds alike, its ID and its submit time:
//
//	sjt1.KEYID.JOB.MAC
//
// KEYID is the first 4 bytes of the SHA-256 of the key that made it, in
// hex; JOB the job's ID; MAC the HMAC-SHA256, under that key, of
// jobTokenLabel, the job's ID, a zero byte and its submit time (8 bytes
// big-endian, unix nanoseconds), in unpadded base64url. The submit time
// binds the token to this job and not to another numbered alike (a
// cluster started again from empty numbers its jobs from j1 again).
// Checking one costs two SHA-256 blocks and a lookup of the job, and
// allocates nothing.

// JobTokenPrefix starts every job token; a token file's tokens may not
// start with it.
const JobTokenPrefix = "sjt1."

// MinJobKeyLen is the least length of a job token key, in bytes.
const MinJobKeyLen = 32

const (
	jobTokenLabel = "sluice job token v1\x00"
	keyIDLen      = 8 // hex of 4 bytes
	macLen        = 43
	// maxTokenJobLen bounds a token's job ID: "j" and a uint64.
	maxTokenJobLen = 21
	// maxMACInput is the longest message a token's MAC covers.
	maxMACInput = len(jobTokenLabel) + maxTokenJobLen + 1 + 8
)

// ErrJobKeys is wrapped by the errors of ParseJobKeys and NewJobKeys.
var ErrJobKeys = errors.New("server: job token keys")

// JobKeys are the keys job tokens are made and checked with: the first
// makes them, every one checks them, so that a key can be rotated without
// failing the tokens of running appmasters (see ParseJobKeys). Every
// replica of a cluster must hold the same keys. It is immutable and safe
// for concurrent use; nil holds no key (no job tokens).
type JobKeys struct {
	keys []jobKey
}

// jobKey is one key, as HMAC uses it: its blocks XORed with the inner and
// outer pads.
type jobKey struct {
	id         string
	ipad, opad [sha256.BlockSize]byte
}

// NewJobKeys returns the keys, the first of which makes tokens. Each is at
// least MinJobKeyLen bytes, and no two are equal.
func NewJobKeys(keys ...[]byte) (*JobKeys, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrJobKeys)
	}
	k := &JobKeys{}
	for i, key := range keys {
		if len(key) < MinJobKeyLen {
			return nil, fmt.Errorf("%w: key %d is %d bytes, less than %d", ErrJobKeys, i+1, len(key), MinJobKeyLen)
		}
		sum := sha256.Sum256(key)
		jk := jobKey{id: hex.EncodeToString(sum[:keyIDLen/2])}
		for _, o := range k.keys {
			if o.id == jk.id {
				return nil, fmt.Errorf("%w: key %d repeats an earlier one", ErrJobKeys, i+1)
			}
		}
		if len(key) > sha256.BlockSize {
			key = sum[:]
		}
		copy(jk.ipad[:], key)
		copy(jk.opad[:], key)
		for j := range jk.ipad {
			jk.ipad[j] ^= 0x36
			jk.opad[j] ^= 0x5c
		}
		k.keys = append(k.keys, jk)
	}
	return k, nil
}

// LoadJobKeys reads a job token key file (see ParseJobKeys).
func LoadJobKeys(path string) (*JobKeys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJobKeys, err)
	}
	defer f.Close()
	k, err := ParseJobKeys(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// ParseJobKeys reads a job token key file: one key a line, each at least
// MinJobKeyLen bytes (the line's bytes, leading and trailing blanks
// trimmed, such as the output of `head -c 32 /dev/urandom | base64`).
// Blank lines and lines starting with # are ignored. The first key makes
// tokens; the others only check them. To rotate: add the new key as the
// second line on every replica, then make it the first, and drop the old
// one once the appmaster jobs that started before have ended.
func ParseJobKeys(r io.Reader) (*JobKeys, error) {
	var keys [][]byte
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(line) < MinJobKeyLen {
			return nil, fmt.Errorf("%w: line %d: a key is at least %d bytes, this one %d", ErrJobKeys, n, MinJobKeyLen, len(line))
		}
		keys = append(keys, []byte(line))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJobKeys, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: the file holds no key", ErrJobKeys)
	}
	return NewJobKeys(keys...)
}

// Token returns the token of job, submitted at submitted (unix
// nanoseconds), made with the first key.
func (k *JobKeys) Token(job string, submitted int64) string {
	key := &k.keys[0]
	mac := key.mac(job, submitted)
	var b strings.Builder
	b.Grow(len(JobTokenPrefix) + keyIDLen + 1 + len(job) + 1 + macLen)
	b.WriteString(JobTokenPrefix)
	b.WriteString(key.id)
	b.WriteByte('.')
	b.WriteString(job)
	b.WriteByte('.')
	var enc [macLen]byte
	base64.RawURLEncoding.Encode(enc[:], mac[:])
	b.Write(enc[:])
	return b.String()
}

// mac is HMAC-SHA256 (RFC 2104) of the token's message for job and
// submitted, computed in two fixed buffers on the stack.
func (key *jobKey) mac(job string, submitted int64) [sha256.Size]byte {
	var in [sha256.BlockSize + maxMACInput]byte
	n := copy(in[:], key.ipad[:])
	n += copy(in[n:], jobTokenLabel)
	n += copy(in[n:], job[:min(len(job), maxTokenJobLen)])
	in[n] = 0
	n++
	binary.BigEndian.PutUint64(in[n:], uint64(submitted))
	n += 8
	inner := sha256.Sum256(in[:n])
	var out [sha256.BlockSize + sha256.Size]byte
	copy(out[:], key.opad[:])
	copy(out[sha256.BlockSize:], inner[:])
	return sha256.Sum256(out[:])
}

// parseJobToken splits a token that starts with JobTokenPrefix into its
// key ID, job and MAC text; false when it has not the shape of one.
func parseJobToken(tok string) (keyID, job, mac string, ok bool) {
	rest := tok[len(JobTokenPrefix):]
	if len(rest) < keyIDLen+1+2+1+macLen || rest[keyIDLen] != '.' || rest[len(rest)-macLen-1] != '.' {
		return "", "", "", false
	}
	keyID, job, mac = rest[:keyIDLen], rest[keyIDLen+1:len(rest)-macLen-1], rest[len(rest)-macLen:]
	if len(job) > maxTokenJobLen || !validJobID(job) {
		return "", "", "", false
	}
	return keyID, job, mac, true
}

// check reports whether mac is the MAC text of job and submitted under the
// key named keyID; the comparison takes the same time wherever the two
// differ.
func (k *JobKeys) check(keyID, job, mac string, submitted int64) bool {
	for i := range k.keys {
		key := &k.keys[i]
		if key.id != keyID {
			continue
		}
		sum := key.mac(job, submitted)
		var want [macLen]byte
		base64.RawURLEncoding.Encode(want[:], sum[:])
		var diff byte
		for j := range want {
			diff |= want[j] ^ mac[j]
		}
		return diff == 0
	}
	return false
}
