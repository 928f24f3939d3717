package jobfeed

// SetMinStale sets how many stale entries a feed keeps before it drops
// them, and returns a function that restores it.
func SetMinStale(n int) (restore func()) {
	old := minStale
	minStale = n
	return func() { minStale = old }
}

// LogLen returns the length of f's log, stale entries included.
func (f *Feed) LogLen() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.log)
}
