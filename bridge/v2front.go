package bridge

import (
	"encoding/json"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/v2front"
	"github.com/tidwall/gjson"
)

// The engine speaks ACP v1. An editor that speaks v2 gets a v2front.Front
// in front of it: a layer between the editor's stream and the engine,
// chosen by the editor's first initialize (or forced by
// Bridge.EditorProtocol). Every editor line passes the Front before the
// engine reads it, and every message the engine writes for the editor
// passes it before the writer queues it; a v1 editor pays one check per
// message.

// chooseFront picks the editor's protocol version on its first initialize,
// as the SDK's protocol router does for an agent that speaks both: 2 for a
// request of 2 or more, 1 for 1, and for 0 the error v2 defines (-32022,
// with the versions the bridge speaks), after which the editor may try
// again. A protocolVersion that is not a version (a 0.0.x string, a
// fraction, a negative number, or none)
// keeps v1, the version such editors can at least read an answer in; the
// engine answers them as it always has. Messages before the first
// initialize are the engine's to refuse. It reports whether the engine
// should handle frame.
func (vr *v2editor) chooseFront(frame []byte) bool {
	forced := vr.cfg.EditorProtocol
	if forced == 0 && !json.Valid(frame) {
		return true // not JSON (or not UTF-8): the engine's parse error, under id null
	}
	r := gjson.ParseBytes(frame)
	if forced == 0 && (r.Get("method").Str != "initialize" || !r.Get("id").Exists()) {
		return true
	}
	version := 1
	asked := r.Get("params.protocolVersion")
	switch {
	case forced != 0:
		version = forced
	case asked.Type != gjson.Number || asked.Raw == "1" || strings.ContainsAny(asked.Raw, ".eE-"):
		// 1, or not a version at all.
	case asked.Float() >= v2front.ProtocolVersion:
		version = v2front.ProtocolVersion
	default:
		vr.log.Warn("editor asked for a protocol version below 1; refused", "asked", asked.Raw)
		vr.core.writeEditorSession(editorMsg{body: translate.ErrorFrame(json.RawMessage(r.Get("id").Raw), translate.Errorf(codeUnsupportedVersion,
			"the editor asked for ACP version %s, and acp-bridge speaks versions 1 and 2 (none at or below it): ask for 1 or 2", asked.Raw).
			With("requested", json.RawMessage(asked.Raw)).With("supported", []int{1, v2front.ProtocolVersion}).JSON())}, "")
		return false
	}
	vr.frontChosen = true
	vr.log.Info("editor protocol chosen", "version", version, "asked", asked.Raw, "forced", forced != 0)
	if version == v2front.ProtocolVersion {
		vr.front = v2front.New()
		vr.trying = vr.relaysV2()
	}
	return true
}

// codeUnsupportedVersion is ACP v2's "Unsupported protocol version".
const codeUnsupportedVersion = -32022

// applyFront carries out what the Front returned: v2 messages to the
// editor, v1 messages to the engine (the editor's, translated), notes.
func (vr *v2editor) applyFront(outs []v2front.Out) {
	for _, o := range outs {
		switch o.To {
		case v2front.ToEditor:
			vr.core.writeEditorSession(editorMsg{body: o.Frame, translated: true}, o.Session)
		case v2front.ToEngine:
			vr.core.fromEditor(o.Frame)
		case v2front.Note:
			vr.core.repaired(Repair(o.Name), o.Session, o.Detail)
		}
	}
}

// toFront passes one message the engine wrote for a v2 editor through the
// Front. The Front's answers to the engine (a refused terminal call) wait
// for the loop's next turn: this runs inside a translator's outputs, which
// must not be fed again before they are all applied.
func (vr *v2editor) toFront(m editorMsg, session string) {
	whole := m.body
	if m.head != nil || m.tail != nil {
		whole = append(append(append(make([]byte, 0, m.size()), m.head...), m.body...), m.tail...)
	}
	for _, o := range vr.front.FromEngine(whole) {
		switch o.To {
		case v2front.ToEditor:
			if o.Session == "" {
				o.Session = session
			}
			vr.core.writeEditorSession(editorMsg{body: o.Frame, translated: true}, o.Session)
		case v2front.ToEngine:
			vr.frontReplies = append(vr.frontReplies, o.Frame)
		case v2front.Note:
			vr.core.repaired(Repair(o.Name), o.Session, o.Detail)
		}
	}
}

// releaseFrontReplies hands the engine the Front's answers to its calls
// (the front's own: the tap does not show them as the editor's).
func (vr *v2editor) releaseFrontReplies() {
	if len(vr.frontReplies) == 0 {
		return
	}
	vr.viaFront = true
	for len(vr.frontReplies) > 0 {
		frame := vr.frontReplies[0]
		vr.frontReplies = vr.frontReplies[1:]
		vr.core.fromEditor(frame)
	}
	vr.frontReplies = nil
	vr.viaFront = false
}
