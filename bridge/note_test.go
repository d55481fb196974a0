package bridge_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
)

// A repair a transport reports with Note is counted by the engine and shown
// to Tap as a note, like the engine's own; before Serve it is dropped.
func TestNote_FromATransport(t *testing.T) {
	var mu sync.Mutex
	var notes []bridge.TapEvent
	var b *bridge.Bridge
	h := newHarness(t, func(br *bridge.Bridge) {
		b = br
		br.Note("stdout-noise", "dropped before Serve")
		br.Tap = func(ev bridge.TapEvent) {
			if ev.Hop == bridge.BridgeHop {
				mu.Lock()
				notes = append(notes, ev)
				mu.Unlock()
			}
		}
	})
	h.initialize()
	b.Note("stdout-noise", "non-JSON line on stdout: hello")
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(notes)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notes) != 1 || notes[0].Note != "stdout-noise" || !strings.Contains(notes[0].Detail, "hello") {
		t.Errorf("notes = %+v", notes)
	}
}

// OnNote sees the engine's notes and nothing else: not the messages of
// either hop, which a Tap sees and pays for.
func TestOnNote_NotesOnly(t *testing.T) {
	var mu sync.Mutex
	var events []bridge.TapEvent
	var b *bridge.Bridge
	h := newHarness(t, func(br *bridge.Bridge) {
		b = br
		br.AddOnNote(func(ev bridge.TapEvent) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		})
	})
	h.initialize()
	b.Note("stdout-noise", "non-JSON line on stdout: hello")
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(events)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 || events[0].Hop != bridge.BridgeHop || events[0].Note != "stdout-noise" {
		t.Errorf("OnNote saw %+v; want the one note, and no message of initialize's exchange", events)
	}
}
