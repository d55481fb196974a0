// Scenarios of a connection's start: initialize and its version
// negotiation, a second initialize, and session/new.

package check

import (
	"strings"

	"github.com/tidwall/gjson"
)

// initializeChecked runs initialize asking for the run's version and
// checks the answer: that version, as an integer, and capabilities that
// are an object. ok false means v is the scenario's verdict.
func (r *run) initializeChecked() (m Msg, v verdict, ok bool) {
	want := r.proto.version
	m, err := r.call("initialize", r.proto.initParams)
	if err != nil {
		return m, fail(nil, "%s", waitErr("initialize", err)), false
	}
	if m.IsError() {
		return m, fail([]int{m.N}, "initialize asking for version %d answered an error", want), false
	}
	got := m.Get("result.protocolVersion")
	if got.Type != gjson.Number || strings.ContainsAny(got.Raw, ".eE") {
		return m, fail([]int{m.N}, "result.protocolVersion is %s, want the integer %d", orAbsent(got), want), false
	}
	if got.Int() != int64(want) {
		return m, fail([]int{m.N}, "result.protocolVersion is %d for a client that asked for %d; %s", got.Int(), want, r.proto.versionRule), false
	}
	if c := m.Get("result." + r.proto.capabilities); c.Exists() && !c.IsObject() {
		return m, fail([]int{m.N}, "result.%s is not an object", r.proto.capabilities), false
	}
	return m, verdict{}, true
}

func scInitialize(r *run) verdict {
	m, v, ok := r.initializeChecked()
	if !ok {
		return v
	}
	// Negotiation: asked for a version it cannot know, the agent answers
	// the latest version it supports, which is at most the one asked for.
	r.close()
	p2, err := dialPeer(r.ctx, r.opts)
	if err != nil {
		return notRun("cannot reach the agent a second time: %v", err)
	}
	defer p2.close()
	m2, err := p2.call("initialize", initParams(65535))
	if err != nil {
		return fail(nil, "%s", waitErr("initialize asking for protocol version 65535", err))
	}
	v2 := m2.Get("result.protocolVersion")
	if m2.IsError() || v2.Type != gjson.Number || v2.Int() < 1 || v2.Int() > 65535 {
		r.peer = p2
		return fail([]int{m2.N}, "asked for protocol version 65535, the agent answered %s; it must answer the latest version it supports", m2.Raw)
	}
	name := m.Get("result.agentInfo.name").Str
	return pass("protocolVersion 1; asked for 65535 the agent offers %d; agent %q", v2.Int(), name)
}

func scReinitialize(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	m, err := r.call("initialize", r.proto.initParams)
	if err != nil {
		return fail(nil, "%s", waitErr("second initialize", err))
	}
	if m.IsError() || !m.Get("result").IsObject() {
		return fail([]int{m.N}, "a second initialize was answered %s; editors re-initialize after a reconnect or a settings change", m.Get("error").Raw+m.Get("result").Raw)
	}
	return pass("answered again")
}

func scSessionNew(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	before := len(r.messages())
	m, err := r.newSession()
	if err != nil {
		var lines []int
		if m.Raw != nil {
			lines = []int{m.N}
		}
		return fail(lines, "%v", err)
	}
	for _, x := range r.messages()[before:m.N] {
		if !x.Out && x.method == "session/update" {
			return fail([]int{x.N, m.N}, "a session/update arrived before session/new's answer named the session; the editor cannot route it")
		}
	}
	return pass("session %q", r.sid)
}
