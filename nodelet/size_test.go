package nodelet

import (
	"testing"
	"unsafe"
)

// TestDesiredPodSize keeps DesiredPod within 128 bytes: up to that size,
// Go's maps keep values in place, not each in an allocation of its own, and
// the agent and the remote Dispatcher keep maps of them, an entry a pod.
func TestDesiredPodSize(t *testing.T) {
	if n := unsafe.Sizeof(DesiredPod{}); n > 128 {
		t.Fatalf("DesiredPod is %d bytes, over 128: its maps allocate each value", n)
	}
}
