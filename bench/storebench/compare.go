package storebench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/raftkv"
)

// Comparison is one run of the store benchmark: Sluice's raftkv and etcd
// driven the same way, one after the other.
type Comparison struct {
	Writers    int `json:"writers"`
	ValueBytes int `json:"value_bytes"`
	Replicas   int `json:"replicas"`
	// PeerTLS says raftkv's replicas spoke mutual TLS among themselves
	// (CompareConfig.PeerTLS).
	PeerTLS bool    `json:"peer_tls"`
	Sluice  Result  `json:"sluice"`
	Etcd    *Result `json:"etcd,omitempty"`
	// FailoverMs is how long after the leader was stopped the first write
	// was committed by a new leader (raftkv only; 0 when not measured).
	FailoverMs float64 `json:"failover_ms,omitempty"`
}

// CompareConfig says what Compare runs.
type CompareConfig struct {
	Config
	Replicas int
	// Dir holds the data directories; empty means a temporary directory,
	// removed afterwards.
	Dir string
	// NoEtcd skips the etcd side.
	NoEtcd bool
	// EtcdDriver is the etcd load driver's path; empty means
	// FindEtcdDriver's search.
	EtcdDriver string
	// Failover also measures a failover of raftkv: the leader is stopped
	// under load and the first write of the new leader timed.
	Failover bool
	// PeerTLS makes raftkv's replicas speak mutual TLS 1.3 among
	// themselves, with throwaway certificates made in Dir; etcd's side
	// stays plaintext. Runs with and without it compare best in separate
	// processes, interleaved: a second cluster started in one process
	// runs measurably slower than the first, so one process running both
	// would favour whichever went first.
	PeerTLS bool
}

// Compare drives raftkv and then etcd (when installed and not skipped)
// with cfg's writers.
func Compare(ctx context.Context, cfg CompareConfig) (Comparison, error) {
	if err := cfg.Validate(); err != nil {
		return Comparison{}, fmt.Errorf("store benchmark: %w", err)
	}
	if cfg.Replicas < 1 {
		return Comparison{}, fmt.Errorf("store benchmark: replicas %d: want at least 1", cfg.Replicas)
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-bench-store-")
		if err != nil {
			return Comparison{}, fmt.Errorf("store benchmark: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	out := Comparison{Writers: cfg.Writers, ValueBytes: cfg.ValueBytes, Replicas: cfg.Replicas, PeerTLS: cfg.PeerTLS && cfg.Replicas > 1}
	kv, err := StartRaftKV(ctx, filepath.Join(dir, "raftkv"), cfg.Replicas, RaftKVOptions{PeerTLS: cfg.PeerTLS})
	if err != nil {
		return out, err
	}
	out.Sluice, err = Drive(ctx, kv, cfg.Config)
	if err == nil && cfg.Failover && cfg.Replicas > 1 {
		out.FailoverMs, err = failover(ctx, kv)
	}
	kv.Close()
	if err != nil {
		return out, fmt.Errorf("raftkv: %w", err)
	}
	if cfg.NoEtcd {
		return out, nil
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		return out, nil // no anchor here: the etcd side is skipped
	}
	driver, err := FindEtcdDriver(cfg.EtcdDriver)
	if err != nil {
		return out, fmt.Errorf("etcd side: %w", err)
	}
	e, err := StartEtcd(ctx, filepath.Join(dir, "etcd"), cfg.Replicas)
	if errors.Is(err, ErrNoEtcd) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	defer e.Close()
	r, err := e.Drive(ctx, driver, cfg.Config)
	if err != nil {
		return out, fmt.Errorf("etcd: %w", err)
	}
	out.Etcd = &r
	return out, nil
}

// failover stops the leader while writers keep writing and returns the
// milliseconds from the stop to the first write a new leader commits.
func failover(ctx context.Context, kv *RaftKV) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	old := kv.leader()
	if old == nil {
		return 0, errors.New("failover: no leader")
	}
	id := old.Status().ID
	committed := make(chan time.Time, 64)
	for w := range 8 {
		go func() {
			value := make([]byte, 256)
			for i := 0; ctx.Err() == nil; i++ {
				n := kv.leader()
				if n == nil || n.Status().ID == id {
					time.Sleep(time.Millisecond)
					continue
				}
				wctx, wcancel := context.WithTimeout(ctx, time.Second)
				_, err := n.Propose(wctx, raftkv.PutCommand(fmt.Appendf(nil, "failover/%d/%d", w, i), value))
				wcancel()
				if err == nil {
					select {
					case committed <- time.Now():
					default:
					}
				}
			}
		}()
	}
	stopped := time.Now()
	_ = old.Close()
	select {
	case t := <-committed:
		return float64(t.Sub(stopped)) / float64(time.Millisecond), nil
	case <-time.After(30 * time.Second):
		return 0, errors.New("failover: no write committed within 30s of stopping the leader")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
