// Package roundinput is the view of the FSM a scheduling round reads: it
// builds placement's input (placement.Input) from the FSM's state
// (fsm.RoundRead) and keeps it from round to round by the FSM's change
// sets.
//
// It owns the translation from the replicated state to a round's terms:
// which nodes a round sees (the ready ones, by name), what is free on
// each (a tier's allocatable less what its tasks and cached slots hold,
// with the slots whose TTL ended by the read's time counted free, clamped
// at zero, and ports bounded by what the node's range has free), which
// groups it takes (those with tasks eligible at its time, highest
// priority first, then oldest job, then a job's groups in order, up to a
// limit of tasks), and the preemption victims (AddVictims).
//
// Invariants: a Kept read after consuming every change set up to the
// FSM's state equals Build at the same time (the FSM's random-command
// tests check it after every command); a Kept Input marked Kept lists in
// Changed every node that changed since Placed; a Kept never holds the
// FSM's lock beyond a read, and its Consume, on the FSM's apply
// goroutine, only appends names under its own lock.
//
//	in := roundinput.Build(f, time.Now(), 20_000) // for placement.Placer.Place
//	var kept roundinput.Kept
//	defer f.Subscribe(kept.Consume)()
//	in = kept.Read(f, time.Now(), 20_000) // the same, kept from round to round
package roundinput
