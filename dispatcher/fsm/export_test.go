package fsm

// Dump is dump, for black-box tests.
func Dump(f *FSM) string { return f.dump() }
