package bridge

// Handling an event where it was read.
//
// The loop owns the engine's state, and it did so by being the one
// goroutine that touches it: every line of the editor and every frame of an
// agent was handed to it over a channel. A request's round trip then paid
// four goroutine hand-offs (editor reader → loop → link writer, link
// reader → loop → editor writer), each a wake-up of a parked goroutine,
// often on another thread: most of an echo's added latency, and nearly
// half of its instructions, were the scheduler's.
//
// What makes the state the loop's is the gate (fast.go), which the loop
// holds whenever it handles an event and releases only while it waits. So
// the goroutine that read an event may handle it itself, exactly as the
// loop would, when it can take the gate without waiting (the loop is idle)
// and nothing it handed the loop before is still unhandled (so events keep
// their order). Otherwise, and for everything but plain frames and lines
// (a lost link, the end of the input), it hands the event to the loop as
// before. Handling is the loop's own code run under the gate: one owner at
// a time, never two.
//
// After an event handled this way the loop, parked in its select, has not
// seen the state change. Where that matters to what it waits for (it
// stopped reading the editor for backpressure, the input has ended and the
// requests in flight may all be answered), the handler wakes it (nudge).

// tryGate takes the gate if the loop is waiting and still running.
func (e *engine) tryGate() bool {
	if !e.gate.TryLock() {
		return false
	}
	if e.loopDone {
		e.gate.Unlock()
		return false
	}
	return true
}

// inlineAgentEvent handles ev, read by link l's goroutine, on that
// goroutine, and reports whether it did; if not, ev is for the inbox.
//
// A notification is left to the loop: a stream's updates that could not
// take the fast path come in bursts, which the loop handles a batch at a
// time and writes with one hand-off, cheaper than one by one here.
func (e *engine) inlineAgentEvent(l *link, ev *agentEvent) bool {
	if ev.err != nil || ev.up || ev.parsed && ev.env.ID == nil || l.inflight.Load() != 0 || !e.tryGate() {
		return false
	}
	if l.inflight.Load() != 0 {
		e.gate.Unlock()
		return false
	}
	e.collectStreamed()
	e.batching = true
	e.agentEvent(ev)
	e.batching = false
	e.flushEditor()
	e.afterInline()
	return true
}

// inlineEditorLine handles a line of the editor's on the reader's
// goroutine, and reports whether it did; if not, the line is for the loop.
func (e *engine) inlineEditorLine(frame []byte) bool {
	if e.linesInflight.Load() != 0 || !e.tryGate() {
		return false
	}
	if e.linesInflight.Load() != 0 || e.paused() || !e.out.empty() {
		// The loop has a line of ours to handle, or is not reading the
		// editor at all (backpressure): the line waits in the channel.
		// Nor while the editor has output waiting: a handler that
		// blocked on a full queue would block the reader, which must go
		// on reading to see the editor close its input (readLoop). (A
		// direct write still under way is not output waiting: what a
		// handler writes meanwhile queues behind it, and the queue is
		// empty.)
		e.gate.Unlock()
		return false
	}
	e.collectStreamed()
	e.editorLine(frame)
	e.afterInline()
	return true
}

// afterInline is the rest of a loop iteration: what follows every event,
// then reopening the gate. The gate is held.
func (e *engine) afterInline() {
	e.releaseHeld()
	e.flushRecords()
	if e.paused() || e.inputEnded() {
		// The loop must look again at what it waits for.
		signal(e.nudge)
	}
	e.openGate()
}
