package bridge

// Note reports a repair made outside the engine, by a link's transport (a
// child's stdout noise skipped, say): the engine counts it, logs it at
// debug level and shows it to Tap like its own repairs. It is safe to call
// from any goroutine; the note is dropped when the bridge is not serving
// or its loop is too busy to take it at once, so a transport never waits
// on the engine.
func (b *Bridge) Note(r Repair, detail string) {
	e := b.serving.Load()
	if e == nil {
		return
	}
	select {
	case e.tasks <- func() { e.repaired(r, "", detail) }:
	default:
	}
}
