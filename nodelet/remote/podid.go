package remote

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/nodelet/runtime"
)

// hashedPrefix starts the pod ID of a task ID that cannot be spelled
// directly. Direct pod IDs never contain '-', so the two forms never meet.
const hashedPrefix = "t-"

// PodID returns the pod ID (valid under runtime.CheckName) of the pod that
// runs a task. A task ID of letters, digits, '_' and '/', starting with a
// letter or digit and at most runtime.MaxIDLen bytes, as every ID the
// dispatcher forms ("j12/0/5/1": job/group/index/attempt), maps to itself
// with '/' replaced by '.' ("j12.0.5.1"), so that people recognise it. Any
// other task ID maps to "t-" and a hash of it. Distinct task IDs map to
// distinct pod IDs (up to hash collisions for the second form).
func PodID(taskID string) string {
	if direct(taskID) {
		return strings.ReplaceAll(taskID, "/", ".")
	}
	sum := sha256.Sum256([]byte(taskID))
	return hashedPrefix + hex.EncodeToString(sum[:20])
}

// direct reports whether taskID maps to a pod ID by replacing '/' with '.'.
func direct(taskID string) bool {
	if taskID == "" || len(taskID) > runtime.MaxIDLen {
		return false
	}
	for i := 0; i < len(taskID); i++ {
		c := taskID[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '/') {
			return false
		}
	}
	return true
}

// attempt returns the attempt number a dispatcher task ID ends with
// ("j12/0/5/1" → 1), or 0 when it ends otherwise. Pods of successive
// attempts differ in ID already; the attempt is their generation too.
func attempt(taskID string) int64 {
	i := strings.LastIndexByte(taskID, '/')
	if i < 0 {
		return 0
	}
	n, err := strconv.ParseInt(taskID[i+1:], 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
