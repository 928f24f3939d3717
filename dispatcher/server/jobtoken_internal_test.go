package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// TestJobTokenMAC compares the token's MAC with crypto/hmac's, for keys
// shorter and longer than a SHA-256 block.
func TestJobTokenMAC(t *testing.T) {
	for _, key := range []string{strings.Repeat("k", 32), strings.Repeat("long key ", 10)} {
		k, err := NewJobKeys([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			job       string
			submitted int64
		}{{"j1", 0}, {"j42", 1765000000123456789}, {"j18446744073709551615", -1}} {
			m := hmac.New(sha256.New, []byte(key))
			m.Write([]byte(jobTokenLabel + c.job + "\x00"))
			_ = binary.Write(m, binary.BigEndian, c.submitted)
			sum := sha256.Sum256([]byte(key))
			want := fmt.Sprintf("%s%x.%s.%s", JobTokenPrefix, sum[:4], c.job, base64.RawURLEncoding.EncodeToString(m.Sum(nil)))
			if got := k.Token(c.job, c.submitted); got != want {
				t.Errorf("key of %d bytes, %s at %d: token\n%s\nwant\n%s", len(key), c.job, c.submitted, got, want)
			}
		}
	}
}

// TestJobTokenCheckAllocs: checking a token allocates nothing.
func TestJobTokenCheckAllocs(t *testing.T) {
	k, err := NewJobKeys([]byte(strings.Repeat("k", 32)), []byte(strings.Repeat("o", 40)))
	if err != nil {
		t.Fatal(err)
	}
	tok := k.Token("j12345", 99)
	ok := true
	if n := testing.AllocsPerRun(100, func() {
		id, job, mac, parsed := parseJobToken(tok)
		ok = ok && parsed && k.check(id, job, mac, 99)
	}); n != 0 {
		t.Errorf("checking a token allocates %v times", n)
	}
	if !ok {
		t.Error("the token did not check")
	}
}
