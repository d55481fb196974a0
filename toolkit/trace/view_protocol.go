package trace

import (
	"fmt"
	"slices"

	"github.com/tidwall/gjson"
)

// noteProtocol records the ACP versions an answer to initialize
// negotiated, for the page's summary, and returns the text its arrow's
// label gets. On the editor hop acp-bridge's answer says both hops'
// versions in _meta["acp-bridge"] (editorProtocol, agentProtocol); on the
// agent hop the agent's answer says its own.
func (v *View) noteProtocol(r Record) string {
	res := gjson.GetBytes(r.Msg, "result")
	version := res.Get("protocolVersion")
	if version.Type != gjson.Number {
		return ""
	}
	var text string
	switch meta := res.Get(`_meta.acp-bridge`); {
	case r.Hop == "editor" && meta.Get("editorProtocol").Exists():
		text = "editor hop ACP " + meta.Get("editorProtocol").Raw
		if a := meta.Get("agentProtocol"); a.Exists() {
			text += ", agent hop ACP " + a.Raw
		}
	case r.Hop == "agent":
		text = fmt.Sprintf("agent hop (link %d) answered ACP %s", r.Link, version.Raw)
	default:
		text = r.Hop + " hop ACP " + version.Raw
	}
	if !slices.Contains(v.protocols, text) {
		v.protocols = append(v.protocols, text)
	}
	return " ACP " + version.Raw
}
