package v2front

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// initializeToV1 turns a v2 editor's initialize params into v1's: info
// becomes clientInfo and capabilities clientCapabilities, announced without
// fs and terminal (v2 clients have neither) unless the editor announces
// v1's under capabilities._meta["acp-bridge"] (translate.MetaV1ClientCapabilities,
// as an acp-bridge in front of a v1 editor does): then those are announced,
// and the Front relays the methods they cover.
func (f *Front) initializeToV1(params json.RawMessage) json.RawMessage {
	m := members(params)
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	m["protocolVersion"] = json.RawMessage("1")
	if info, ok := m["info"]; ok {
		m["clientInfo"] = info
		delete(m, "info")
	}
	// Every capability is kept (elicitation and _meta have v1's shape,
	// unknown ones pass), auth.terminal becomes v1's boolean, and fs and
	// terminal are announced as the editor's _meta says, else absent.
	caps := members(m["capabilities"])
	delete(m, "capabilities")
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	if auth := gjson.ParseBytes(caps["auth"]); auth.IsObject() {
		a := members(caps["auth"])
		a["terminal"] = mustJSON(auth.Get("terminal").IsObject())
		caps["auth"] = mustJSON(a)
	}
	v1 := gjson.GetBytes(caps["_meta"], gjson.Escape("acp-bridge")+"."+translate.MetaV1ClientCapabilities)
	f.relay = clientMethods{
		fsRead:   v1.Get("fs.readTextFile").Type == gjson.True,
		fsWrite:  v1.Get("fs.writeTextFile").Type == gjson.True,
		terminal: v1.Get("terminal").Type == gjson.True,
	}
	caps["fs"] = mustJSON(map[string]bool{"readTextFile": f.relay.fsRead, "writeTextFile": f.relay.fsWrite})
	caps["terminal"] = mustJSON(f.relay.terminal)
	m["clientCapabilities"] = mustJSON(caps)
	return mustJSON(m)
}

// clientMethods are the v1 client methods a v2 editor serves.
type clientMethods struct {
	fsRead, fsWrite, terminal bool
}

// serves reports whether the editor serves the v1 client method.
func (c clientMethods) serves(method string) bool {
	switch {
	case method == "fs/read_text_file":
		return c.fsRead
	case method == "fs/write_text_file":
		return c.fsWrite
	case strings.HasPrefix(method, "terminal/"):
		return c.terminal
	}
	return false
}

// initializeToV2 turns the engine's v1 initialize answer into v2's.
func (f *Front) initializeToV2(result json.RawMessage) json.RawMessage {
	m := members(result)
	if m == nil {
		return result
	}
	m["protocolVersion"] = json.RawMessage("2")
	info := members(m["agentInfo"])
	delete(m, "agentInfo")
	if info == nil {
		info = map[string]json.RawMessage{}
	}
	for _, key := range []string{"name", "version"} {
		if r := gjson.ParseBytes(info[key]); r.Type != gjson.String {
			info[key] = quoteJSON("unknown")
		}
	}
	m["info"] = mustJSON(info)
	f.agent = gjson.ParseBytes(m["agentCapabilities"])
	if f.agent.Get("mcpCapabilities.sse").Bool() {
		f.note(RepairDroppedSSE, "", "v2 has no SSE MCP servers")
	}
	m["capabilities"] = agentCapsToV2(f.agent)
	delete(m, "agentCapabilities")
	if methods := gjson.ParseBytes(m["authMethods"]); methods.IsArray() {
		out := []json.RawMessage{}
		for _, am := range methods.Array() {
			out = append(out, authMethodToV2(am))
		}
		m["authMethods"] = mustJSON(out)
	}
	meta := members(m["_meta"])
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	own := members(meta["acp-bridge"])
	if own == nil {
		own = map[string]json.RawMessage{}
	}
	own["editorProtocol"] = json.RawMessage("2")
	meta["acp-bridge"] = mustJSON(own)
	m["_meta"] = mustJSON(meta)
	return mustJSON(m)
}

// agentCapsToV2 maps v1 agentCapabilities to v2 capabilities: booleans
// become {} markers, session-scoped groups move under session.
func agentCapsToV2(c gjson.Result) json.RawMessage {
	marker := json.RawMessage("{}")
	prompt := map[string]json.RawMessage{}
	for _, k := range []string{"image", "audio", "embeddedContext"} {
		if c.Get("promptCapabilities." + k).Bool() {
			prompt[k] = marker
		}
	}
	// stdio MCP servers are every v1 agent's baseline.
	mcp := map[string]json.RawMessage{"stdio": marker}
	if c.Get("mcpCapabilities.http").Bool() {
		mcp["http"] = marker
	}
	sess := map[string]json.RawMessage{"prompt": mustJSON(prompt), "mcp": mustJSON(mcp)}
	for _, k := range []string{"delete", "additionalDirectories"} {
		if r := c.Get("sessionCapabilities." + k); r.IsObject() {
			sess[k] = json.RawMessage(r.Raw)
		}
	}
	out := map[string]json.RawMessage{"session": mustJSON(sess)}
	if r := c.Get("auth"); r.IsObject() {
		out["auth"] = json.RawMessage(r.Raw)
	}
	if r := c.Get("_meta"); r.IsObject() {
		out["_meta"] = json.RawMessage(r.Raw)
	}
	return mustJSON(out)
}

// authMethodToV2: v1's id is v2's methodId, and the type v1 leaves out
// ("agent") is required.
func authMethodToV2(am gjson.Result) json.RawMessage {
	m := members(json.RawMessage(am.Raw))
	if m == nil {
		return json.RawMessage(am.Raw)
	}
	if id, ok := m["id"]; ok {
		if _, has := m["methodId"]; !has {
			m["methodId"] = id
		}
		delete(m, "id")
	}
	if _, ok := m["type"]; !ok {
		m["type"] = quoteJSON("agent")
	}
	return mustJSON(m)
}

// openedToV2 turns a v1 session/new, load or resume answer into v2's: the
// modes become a config option, v1 config options get v2's configId.
func (s *session) openedToV2(result json.RawMessage) json.RawMessage {
	m := members(result)
	if m == nil {
		return result
	}
	if modes := gjson.ParseBytes(m["modes"]); modes.IsObject() {
		s.modes = json.RawMessage(modes.Raw)
	}
	delete(m, "modes")
	if opts := gjson.ParseBytes(m["configOptions"]); opts.IsArray() {
		s.configOptions = json.RawMessage(opts.Raw)
	}
	if all := s.configOptionsV2(); len(all) > 0 {
		m["configOptions"] = mustJSON(all)
	} else {
		delete(m, "configOptions")
	}
	return mustJSON(m)
}

// configOptionsV2 is the session's config options in v2's shape, with the
// mode option made from v1 modes (unless the agent has an option by that id).
func (s *session) configOptionsV2() []json.RawMessage {
	out := []json.RawMessage{}
	for _, o := range gjson.ParseBytes(s.configOptions).Array() {
		out = append(out, configOptionToV2(o))
	}
	if s.modes != nil && !hasOption(s.configOptions, modeConfigID) {
		modes := gjson.ParseBytes(s.modes)
		options := []map[string]any{}
		for _, md := range modes.Get("availableModes").Array() {
			o := map[string]any{"value": md.Get("id").Str, "name": md.Get("name").Str}
			if d := md.Get("description"); d.Type == gjson.String {
				o["description"] = d.Str
			}
			options = append(options, o)
		}
		if len(options) > 0 {
			out = append(out, mustJSON(map[string]any{
				"configId": modeConfigID, "name": "Mode", "category": "mode", "type": "select",
				"currentValue": modes.Get("currentModeId").Str, "options": options,
			}))
		}
	}
	return out
}

func configOptionToV2(o gjson.Result) json.RawMessage {
	m := members(json.RawMessage(o.Raw))
	if m == nil {
		return json.RawMessage(o.Raw)
	}
	if id, ok := m["id"]; ok {
		if _, has := m["configId"]; !has {
			m["configId"] = id
		}
		delete(m, "id")
	}
	return mustJSON(m)
}

func hasOption(opts json.RawMessage, id string) bool {
	for _, o := range gjson.ParseBytes(opts).Array() {
		if o.Get("id").Str == id || o.Get("configId").Str == id {
			return true
		}
	}
	return false
}

// updateToV2 translates one v1 session update. ok false drops it.
func (f *Front) updateToV2(sid string, s *session, u gjson.Result) (json.RawMessage, bool) {
	kind := u.Get("sessionUpdate").Str
	switch kind {
	case "user_message_chunk", "agent_message_chunk", "agent_thought_chunk":
		if kind == "user_message_chunk" && s.running > 0 {
			f.note(RepairDroppedPromptEcho, sid, "a user_message_chunk while a prompt ran")
			return nil, false
		}
		if id := u.Get("messageId"); id.Type == gjson.String {
			s.msgKind, s.msgID = kind, id.Str
			return json.RawMessage(u.Raw), true
		}
		if s.msgKind != kind || s.msgID == "" {
			s.msgKind, s.msgID = kind, f.messageID()
		}
		return withMember(json.RawMessage(u.Raw), "messageId", quoteJSON(s.msgID)), true
	case "tool_call", "tool_call_update":
		s.msgKind, s.msgID = "", ""
		tc := toolCallToV2(json.RawMessage(u.Raw))
		return withMember(tc, "sessionUpdate", quoteJSON("tool_call_update")), true
	case "plan":
		s.msgKind, s.msgID = "", ""
		m := members(json.RawMessage(u.Raw))
		plan := map[string]json.RawMessage{"type": quoteJSON("items"), "planId": quoteJSON("plan"), "entries": m["entries"]}
		if plan["entries"] == nil {
			plan["entries"] = json.RawMessage("[]")
		}
		out := map[string]json.RawMessage{"sessionUpdate": quoteJSON("plan_update"), "plan": mustJSON(plan)}
		if meta, ok := m["_meta"]; ok {
			out["_meta"] = meta
		}
		return mustJSON(out), true
	case "available_commands_update":
		return withMember(json.RawMessage(u.Raw), "availableCommands", commandsToV2(u.Get("availableCommands"))), true
	case "current_mode_update":
		if s.modes == nil || hasOption(s.configOptions, modeConfigID) {
			f.note(RepairDroppedModeUpdate, sid, u.Get("currentModeId").Str)
			return nil, false
		}
		s.modes = withMember(s.modes, "currentModeId", quoteJSON(u.Get("currentModeId").Str))
		return mustJSON(map[string]any{"sessionUpdate": "config_option_update", "configOptions": s.configOptionsV2()}), true
	case "config_option_update":
		if opts := u.Get("configOptions"); opts.IsArray() {
			s.configOptions = json.RawMessage(opts.Raw)
		}
		return withMember(json.RawMessage(u.Raw), "configOptions", mustJSON(s.configOptionsV2())), true
	}
	// session_info_update, usage_update and kinds unknown to the Front
	// pass unchanged: v2's enums are open, and its editors fall back.
	return json.RawMessage(u.Raw), true
}

// toolCallToV2 converts a v1 tool call (or update) to v2's upsert: the same
// members, with diff content given v2's changes and a git patch.
func toolCallToV2(tc json.RawMessage) json.RawMessage {
	content := gjson.GetBytes(tc, "content")
	if !content.IsArray() {
		return tc
	}
	items := []json.RawMessage{}
	for _, c := range content.Array() {
		if c.Get("type").Str == "diff" {
			items = append(items, diffToV2(c))
		} else {
			items = append(items, json.RawMessage(c.Raw))
		}
	}
	return withMember(tc, "content", mustJSON(items))
}

// diffToV2 turns v1's whole-file diff (path, oldText, newText) into v2's: a
// change entry and a git patch replacing the old text with the new. v1's
// texts are kept under _meta["acp-bridge"] for editors that want them.
func diffToV2(c gjson.Result) json.RawMessage {
	path := c.Get("path").Str
	old := c.Get("oldText")
	op := "modify"
	if !old.Exists() || old.Type == gjson.Null {
		op = "add"
	}
	out := map[string]any{
		"type":    "diff",
		"changes": []map[string]string{{"operation": op, "path": path}},
		"patch":   map[string]string{"format": "git_patch", "text": gitPatch(path, old, c.Get("newText").Str)},
	}
	meta := members(json.RawMessage(c.Get("_meta").Raw))
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta["acp-bridge"] = mustJSON(map[string]any{"v1Diff": json.RawMessage(withoutMember(json.RawMessage(c.Raw), "_meta"))})
	out["_meta"] = meta
	return mustJSON(out)
}

// gitPatch writes a one-hunk git patch from old (absent for a new file) to
// newText.
func gitPatch(path string, old gjson.Result, newText string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "diff --git %s %s\n", path, path)
	from := path
	if !old.Exists() || old.Type == gjson.Null {
		b.WriteString("new file mode 100644\n")
		from = "/dev/null"
	}
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", from, path)
	oldLines, newLines := lines(old.Str), lines(newText)
	fmt.Fprintf(&b, "@@ -%s +%s @@\n", hunkRange(len(oldLines)), hunkRange(len(newLines)))
	writeSide(&b, '-', old.Str, oldLines)
	writeSide(&b, '+', newText, newLines)
	return b.String()
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n")
}

func hunkRange(n int) string {
	if n == 0 {
		return "0,0"
	}
	return fmt.Sprintf("1,%d", n)
}

func writeSide(b *strings.Builder, sign byte, text string, ls []string) {
	for _, l := range ls {
		b.WriteByte(sign)
		b.WriteString(strings.TrimSuffix(l, "\n"))
		b.WriteByte('\n')
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		b.WriteString("\\ No newline at end of file\n")
	}
}

// permissionToV2 turns v1 session/request_permission params into v2's: a
// title, and the tool call as the request's subject.
func permissionToV2(params json.RawMessage) json.RawMessage {
	m := members(params)
	if m == nil {
		return params
	}
	tc, ok := m["toolCall"]
	delete(m, "toolCall")
	title := gjson.GetBytes(tc, "title").Str
	if title == "" {
		title = "Permission requested"
	}
	if _, has := m["title"]; !has {
		m["title"] = quoteJSON(title)
	}
	if ok && gjson.ParseBytes(tc).IsObject() {
		m["subject"] = mustJSON(map[string]json.RawMessage{"type": quoteJSON("tool_call"), "toolCall": toolCallToV2(tc)})
	}
	return mustJSON(m)
}

// commandsToV2 gives v1 commands v2's required type, "command", and their
// unstructured input ({hint}) v2's "text" input type.
func commandsToV2(list gjson.Result) json.RawMessage {
	cmds := []json.RawMessage{}
	for _, c := range list.Array() {
		cmd := json.RawMessage(c.Raw)
		if !c.Get("type").Exists() {
			cmd = withMember(cmd, "type", quoteJSON("command"))
		}
		if in := c.Get("input"); in.IsObject() && !in.Get("type").Exists() {
			cmd = withMember(cmd, "input", withMember(json.RawMessage(in.Raw), "type", quoteJSON("text")))
		}
		cmds = append(cmds, cmd)
	}
	return mustJSON(cmds)
}
