package fsm

// Dump is dump, for black-box tests.
func Dump(f *FSM) string { return f.dump() }

// NodeChanges returns the change set of a command that changed the round
// input's part of the nodes named.
func NodeChanges(f *FSM, names ...string) *Changes {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c := &Changes{Kind: ChangeApplied, Nodes: names}
	for _, name := range names {
		c.nodes = append(c.nodes, f.mu.nodes[name])
	}
	return c
}
