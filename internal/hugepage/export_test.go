package hugepage

// reset forgets the region (its mapping stays: tests only) and Start, for
// a test to begin from a process's state at start-up.
func reset() {
	started.Store(false)
	mu.Lock()
	mapped, region = false, nil
	base.Store(0)
	mu.Unlock()
}
