package raftkv

import (
	"errors"
	"fmt"
)

// Errors callers act on. Every error returned by this package that belongs to
// one of these classes matches it under errors.Is.
var (
	// ErrNotLeader: the replica is not the leader; retry on the leader. The
	// error is a *NotLeaderError that names the leader when it is known.
	ErrNotLeader = errors.New("raftkv: not the leader")
	// ErrStopped: the replica was closed. The outcome of a proposal in flight
	// at that moment is unknown.
	ErrStopped = errors.New("raftkv: replica stopped")
	// ErrProposalDropped: the proposal was certainly not applied and will never
	// be (raft refused it, or a later leader replaced it); it is safe to retry.
	ErrProposalDropped = errors.New("raftkv: proposal dropped")
	// ErrTimeout: the context ended while waiting. The outcome of a proposal
	// is unknown. The error also matches the context's error.
	ErrTimeout = errors.New("raftkv: timed out")
	// ErrStorage: the replica's disk failed. The replica has stopped and
	// serves nothing until it is reopened (and repaired). The error wraps the
	// storage error.
	ErrStorage = errors.New("raftkv: storage failed, replica stopped")
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("raftkv: key not found")
	// ErrCorrupt: a log entry, command or snapshot failed to decode or verify.
	// A corrupt command is rejected as a whole on every replica; nothing of it
	// is applied.
	ErrCorrupt = errors.New("raftkv: corrupt data")
	// ErrTooLarge: a command exceeds Config.MaxCommandBytes.
	ErrTooLarge = errors.New("raftkv: command too large")
	// ErrOutcomeUnknown: the proposal's entry may or may not have been
	// applied; the replica learned the state from a snapshot instead of the
	// log (it lost the leadership and fell far behind). Check the state
	// before retrying.
	ErrOutcomeUnknown = errors.New("raftkv: proposal outcome unknown")

	// Refusals of membership changes (AddMember, PromoteMember,
	// RemoveMember, CatchUp); nothing was changed.
	//
	// ErrMemberExists: the ID, or the address, is a member's already.
	ErrMemberExists = errors.New("raftkv: already a member")
	// ErrNotMember: the ID is no member (or, to PromoteMember, no learner).
	ErrNotMember = errors.New("raftkv: not a member")
	// ErrLastVoter: the change would leave the cluster without a voter.
	ErrLastVoter = errors.New("raftkv: the last voter cannot be removed")
	// ErrBadAddress: a new member's address is missing.
	ErrBadAddress = errors.New("raftkv: bad member address")
	// ErrQuorumAtRisk: after the change, the voters heard from within an
	// election timeout would be no quorum, and the cluster would stop
	// committing; bring the silent ones back (or remove them) first.
	ErrQuorumAtRisk = errors.New("raftkv: the change would leave no active quorum")
	// ErrMembershipPending: another membership change is still being
	// applied; retry once it is. It also matches ErrProposalDropped.
	ErrMembershipPending = errors.New("raftkv: another membership change is in flight")
)

// NotLeaderError is returned by operations that only the leader serves. It
// matches ErrNotLeader under errors.Is. LeaderID is 0 when no leader is known.
type NotLeaderError struct {
	LeaderID   uint64
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == 0 {
		return "raftkv: not the leader (no leader known)"
	}
	return fmt.Sprintf("raftkv: not the leader (leader is %d at %q)", e.LeaderID, e.LeaderAddr)
}

// Is reports whether target is ErrNotLeader.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// storageError wraps a storage failure so that it matches ErrStorage and the
// underlying error.
func storageError(op string, err error) error {
	if err == nil || errors.Is(err, ErrStorage) {
		return err
	}
	if op == "" {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrStorage, op, err)
}
