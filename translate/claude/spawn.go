package claude

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
)

// StreamFlags are the flags every CLI process gets
// (docs/agent-protocols.md#claude-stream-json-launch):
// stream-json both ways, token streaming, and approvals routed to the
// control protocol.
var StreamFlags = []string{
	"--output-format", "stream-json",
	"--input-format", "stream-json",
	"--verbose",
	"--include-partial-messages",
	"--permission-prompt-tool", "stdio",
	"--replay-user-messages",
}

// uuidNamespace is the namespace of SessionUUID's name-based UUIDs: the
// RFC 9562 URL namespace, so that the ids are UUIDv5 of
// "acp-bridge:claude:<session id>".
var uuidNamespace = [16]byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// SessionUUID returns the CLI session id (--session-id, --resume) for an
// ACP session id: the id itself when it already is a UUID (a session the
// CLI created, named by an editor), else a UUIDv5 of it. The same ACP id
// always gives the same UUID, so a session the bridge created can be
// resumed by its ACP id.
func SessionUUID(session string) string {
	if isUUID(session) {
		return strings.ToLower(session)
	}
	h := sha1.New()
	h.Write(uuidNamespace[:])
	h.Write([]byte("acp-bridge:claude:" + session))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// sessionParams are the params of session/new, load and resume that shape
// the CLI's command line.
type sessionParams struct {
	SessionID             string            `json:"sessionId"`
	Cwd                   *string           `json:"cwd"`
	MCPServers            []json.RawMessage `json:"mcpServers"`
	AdditionalDirectories []string          `json:"additionalDirectories"`
}

// BuildSpawn implements translate.SpawnBuilder: the CLI's arguments after
// the configured program and its own arguments (Append), in the session's
// cwd. The engine calls it before feeding m itself.
func (t *translator) BuildSpawn(m translate.Msg) (translate.Spawn, error) {
	var p sessionParams
	if err := json.Unmarshal(m.Body, &p); err != nil {
		return translate.Spawn{}, fmt.Errorf("the params are not a session request: %v", err)
	}
	if p.Cwd == nil || !filepath.IsAbs(*p.Cwd) {
		return translate.Spawn{}, fmt.Errorf("cwd must be an absolute path")
	}
	session := m.Session
	if session == "" {
		session = p.SessionID
	}
	if session == "" {
		return translate.Spawn{}, fmt.Errorf("no session id to start Claude Code with")
	}
	argv := append([]string(nil), StreamFlags...)
	if t.opts.Model != "" {
		argv = append(argv, "--model", t.opts.Model)
	}
	if t.opts.PermissionMode != "" {
		argv = append(argv, "--permission-mode", t.opts.PermissionMode)
	}
	switch m.Method {
	case "session/new":
		argv = append(argv, "--session-id", SessionUUID(session))
	case "session/load", "session/resume":
		argv = append(argv, "--resume", SessionUUID(session))
	default:
		return translate.Spawn{}, fmt.Errorf("%s does not start a Claude Code session", m.Method)
	}
	if len(p.MCPServers) > 0 {
		cfg, err := mcpConfig(p.MCPServers)
		if err != nil {
			return translate.Spawn{}, err
		}
		argv = append(argv, "--mcp-config", cfg)
	}
	for _, d := range p.AdditionalDirectories {
		argv = append(argv, "--add-dir", d)
	}
	argv = append(argv, t.opts.ExtraArgs...)
	return translate.Spawn{Argv: argv, Append: true, Cwd: filepath.Clean(*p.Cwd)}, nil
}

// mcpConfig converts ACP MCP server configs (schema: McpServer) to the JSON
// the CLI's --mcp-config takes: {"mcpServers":{name:{type, …}}}, where env
// and headers are maps rather than name/value lists.
func mcpConfig(servers []json.RawMessage) (string, error) {
	type nameValue struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	type server struct {
		Type    string   `json:"type,omitempty"`
		Command string   `json:"command,omitempty"`
		Args    []string `json:"args,omitempty"`
		// Env and Headers are pointers so that an empty list still
		// appears as an empty map only where the transport has it.
		Env     *map[string]string `json:"env,omitempty"`
		URL     string             `json:"url,omitempty"`
		Headers *map[string]string `json:"headers,omitempty"`
	}
	out := make(map[string]server, len(servers))
	for i, raw := range servers {
		var s struct {
			Type    string      `json:"type"`
			Name    string      `json:"name"`
			Command string      `json:"command"`
			Args    []string    `json:"args"`
			Env     []nameValue `json:"env"`
			URL     string      `json:"url"`
			Headers []nameValue `json:"headers"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("mcpServers[%d] is not an MCP server config: %v", i, err)
		}
		if s.Name == "" {
			return "", fmt.Errorf("mcpServers[%d] has no name", i)
		}
		if _, dup := out[s.Name]; dup {
			return "", fmt.Errorf("mcpServers has two servers named %q", s.Name)
		}
		toMap := func(list []nameValue) *map[string]string {
			m := make(map[string]string, len(list))
			for _, nv := range list {
				m[nv.Name] = nv.Value
			}
			return &m
		}
		switch s.Type {
		case "", "stdio":
			if s.Command == "" {
				return "", fmt.Errorf("mcpServers[%d] (%s) has no command", i, s.Name)
			}
			out[s.Name] = server{Type: "stdio", Command: s.Command, Args: s.Args, Env: toMap(s.Env)}
		case "http", "sse":
			if s.URL == "" {
				return "", fmt.Errorf("mcpServers[%d] (%s) has no url", i, s.Name)
			}
			out[s.Name] = server{Type: s.Type, URL: s.URL, Headers: toMap(s.Headers)}
		default:
			return "", fmt.Errorf("mcpServers[%d] (%s) has transport %q, which Claude Code cannot connect to", i, s.Name, s.Type)
		}
	}
	return string(marshal(struct {
		MCPServers map[string]server `json:"mcpServers"`
	}{out})), nil
}
