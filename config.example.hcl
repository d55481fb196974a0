# acp-bridge configuration: an annotated example of every option.
#
# acp-bridge reads this file from --config (env ACP_BRIDGE_CONFIG), or by
# default from <user config dir>/acp-bridge/config.hcl, i.e.
# ~/.config/acp-bridge/config.hcl on Linux and
# ~/Library/Application Support/acp-bridge/config.hcl on macOS. A missing
# default file is fine; a missing --config file is an error.
#
# Command-line flags override this file, and this file overrides the built-in
# defaults. Check a file with:  acp-bridge config validate --config FILE
#
# Syntax is HCL (https://github.com/hashicorp/hcl). Unknown arguments and
# blocks are errors, reported with file:line:column. Relative paths in
# log_file, dir and ca_file are resolved against this file's directory.
#
# Secrets: write env("NAME") to take a value from the environment variable
# NAME, for example a token. An unset variable is an error naming it when
# serving (`config validate` only warns, so this file checks without the
# variables set), unless a default is given as a second argument:
# env("NAME", "fallback"). Values
# computed with env(), header values and agent environment values never
# appear in acp-bridge's logs.

# Log verbosity: trace, debug, info, warn, error or off. Default "info".
# Logs always go to stderr or log_file; stdout carries nothing but ACP.
log_level = "info"

# File to append logs to instead of stderr. Default "" (stderr).
log_file = ""

# Largest single message accepted from the editor. A longer line is answered
# with an error and skipped; the connection stays up. A whole number of
# bytes, or a size with a unit: B, KiB, MiB, GiB (powers of 1024) or KB, MB,
# GB (powers of 1000). From 1KiB to 1GiB. Default "64MiB".
max_message = "64MiB"

# Budget of each queue of messages waiting for a slow peer (toward each agent,
# from the agents, toward the editor). When one is full the bridge stops
# reading from the side that fills it instead of buffering more, which bounds
# the memory a flood or several large messages in flight can take; a single
# message larger than the budget still passes, alone. A size as for
# max_message, from 4KiB to 1GiB. Default "128KiB".
queue_bytes = "128KiB"

# How long an editor request (other than authenticate and session/prompt,
# which may legitimately run for a long time: a browser login, a model's
# whole turn) may wait for the agent before the bridge answers it with an error. A Go duration such as
# "60s", "2m" or "1m30s"; "0s" or "off" disables the timeout. Default "60s".
request_timeout = "60s"

# After the editor sends session/cancel, how long the agent has to end the
# turn before the bridge answers the prompt itself with stopReason
# "cancelled" and drops the agent's late updates. Must be greater than zero.
# Default "5s".
cancel_grace = "5s"

# The ACP version spoken to the editor: 1, 2, or "auto" (the default: the
# editor's initialize chooses, see docs/protocol-versions.md). --editor-protocol
# overrides it.
editor_protocol = "auto"

# The compliance shim: repairs an imperfect ACP agent's protocol bugs (acp
# dialect only, except one-turn, which applies to every agent). Every rule is
# on by default; switch one off by its name (see docs/shim.md).
# --shim on|off|report|report=FILE and --shim-disable NAME,... override this.
shim {
  # A rule by name: true (the default) or false.
  notification-responses = true
  # How long a prompt's answer waits for updates sent just after it; "off"
  # writes it at once. Unset: 1ms until the agent is seen sending an update
  # after an answer, 30ms from then on.
  # late_quiet = "30ms"
  # Updates after that: "drop" (default) or "forward".
  late_updates = "drop"
  # A second prompt while a turn runs: "reject" (default) or "queue".
  one_turn = "reject"
  # A message the schema rule finds invalid: "log" (default) or "drop".
  schema_invalid = "log"
  # Non-JSON stdout lines in a row before the agent is reported broken.
  stdout_noise_limit = 1000
}

# `acp-bridge serve`: the agent served to remote editors over the ACP remote
# transport (see docs/remote.md). Only serve reads this block; each setting
# is overridden by the flag of the same name (--listen, --path, ...). The
# settings serve shares with the relay stay at the top: max_message bounds a
# message on the endpoint too, and the session settings (state_dir, ...)
# apply to every connection.
serve {
  # HOST:PORT to listen on; port 0 picks a free one. An address beyond
  # loopback needs a token. Default "127.0.0.1:8443".
  listen = "127.0.0.1:8443"

  # The endpoint's path. Default "/acp".
  path = "/acp"

  # The bearer token every request must carry ("Authorization: Bearer
  # TOKEN"), read from the environment: a token written here is refused.
  # Or token_file, a file holding it (relative to this file's directory).
  # --token-env VAR or --token-file FILE override both. Default: none.
  # token      = env("ACP_TOKEN")
  # token_file = "acp-token"

  # Serve HTTPS and WSS with this certificate chain and key (PEM files,
  # both or neither; relative to this file's directory). Default: plain.
  # tls_cert = "cert.pem"
  # tls_key  = "key.pem"

  # Web origins (scheme://host:port) whose pages are served besides the
  # endpoint's own; "*" allows every origin. Default [] (none).
  allow_origins = []

  # Connections open at once; one more is answered 503. Default 64.
  max_connections = 64

  # Output a connection holds that its client has not read; beyond it the
  # connection's bridge waits. A size as for max_message. Default "8MiB".
  max_buffered = "8MiB"

  # Close an HTTP connection with no open stream and no message for this
  # long; "off" never. Default "5m".
  idle_timeout = "5m"
}

# The agent block used when --agent (env ACP_BRIDGE_AGENT) is not given.
# May be omitted when there is only one agent block. It must name one.
default_agent = "gemini"

# Each agent block describes one agent; its label is the name --agent
# selects. It needs exactly one transport: a command argument (the bridge
# starts the agent as a child process and talks over its stdin/stdout) or a
# websocket block.
agent "gemini" {
  # The agent's protocol: "acp" (ACP v1, relayed; the default) or "acp-v0"
  # (Zed ACP 0.0.x, as spoken by `gemini --experimental-acp`). Run
  # `acp-bridge dialects` for the list.
  dialect = "acp-v0"

  # The child's argv. The program is looked up in PATH.
  command = ["gemini", "--experimental-acp"]

  # Extra environment variables for the child, added to the bridge's own.
  env = {
    GEMINI_API_KEY = env("GEMINI_API_KEY")
  }

  # Working directory of the child that handles initialize and
  # authenticate. Children of per-session dialects (acp-v0) run in the
  # session's cwd instead. Default "" (the bridge's working directory).
  dir = ""

  # When the bridge stops the child (the editor went away, or the session
  # ended), it closes the child's stdin, then sends SIGTERM to its process
  # group, then waits this long before SIGKILL. Must be greater than zero.
  # When the bridge itself exits, the grace is cut to what its 3 s exit
  # leaves (about 0.75 s after the end of its input with a request still
  # in flight). Default "2s".
  stop_grace = "2s"

  # Options for the dialect, decoded by the dialect itself; what is allowed
  # here depends on the dialect (see `acp-bridge dialects`).
  options {
    # acp-v0: the protocol version sent in the agent's initialize.
    protocol_version = "0.0.9"
  }
}

agent "remote" {
  dialect = "acp"

  # The ACP version spoken to the agent: 1 or 2 (--agent-protocol). Left
  # out, the bridge asks for 2 and takes the version the agent answers.
  # agent_protocol = 2

  websocket {
    # ws:// or wss:// address of the agent. Required.
    url = "wss://agent.example/acp"

    # HTTP headers sent with the opening handshake.
    headers = {
      Authorization = "Bearer ${env("AGENT_TOKEN")}"
    }

    # Subprotocols offered in Sec-WebSocket-Protocol, in order.
    # Default [] (none).
    subprotocols = ["acp"]

    # PEM file of CA certificates trusted for wss:// instead of the system
    # roots. Default "" (system roots).
    ca_file = "/etc/ssl/my-ca.pem"

    # Bound on the TCP/TLS dial and the WebSocket handshake. Must be greater
    # than zero. Default "10s".
    connect_timeout = "10s"

    # How long the agent may stay silent (no message and no pong) before the
    # link is declared dead. Must be greater than zero. Default "30s".
    pong_wait = "30s"

    # How often the bridge pings the agent. "0s" derives it from pong_wait
    # (two thirds of it, so a pong is due within every pong_wait); "off"
    # turns keepalive off altogether: no pings and no silence limit.
    # Default "0s".
    ping_period = "20s"
  }
}

# A dialect of your own: a rule profile for an agent that speaks its own
# JSON over a WebSocket or stdio (see docs/bridge-your-agent.md, and
# `acp-bridge dialects doc` or docs/profiles.md for the language;
# `acp-bridge dialects show zeroclaw` prints a shipped one). Select it with dialect = "echo-chat" in
# an agent block, or --dialect echo-chat. Shipped profiles: mini-agent-ws,
# agent-rpc, open-interpreter, zeroclaw, chat-lines.
dialect "echo-chat" {
  summary = "a line-oriented chat agent: {\"say\":…} in, {\"text\":…} out"

  request "session/prompt" {
    send = { say = prompt.text, cwd = session.cwd }
  }

  # No end marker: the turn ends after a second without a frame.
  turn {
    silence = "1s"
  }

  event "text" {
    match   = { text = present }
    message = frame.text
  }
}

# Claude Code through its stream-json and control protocol. The bridge starts
# one CLI per session in the session's cwd: the command below, then the
# stream-json flags, --session-id (or --resume for session/load and
# session/resume), --model, --permission-mode, --mcp-config with the editor's
# MCP servers, --add-dir, and extra_args. Log in once with `claude /login`.
#
# agent "claude" {
#   dialect = "claude-stream-json"
#   command = ["claude"]
#   options {
#     # --model, and the model option's first value. Default: the CLI's.
#     model = "sonnet"
#     # --permission-mode: default, acceptEdits, plan or bypassPermissions.
#     permission_mode = "default"
#     # Model choices offered until the CLI lists its own.
#     models = ["sonnet", "opus", "haiku"]
#     # Appended to every CLI command line.
#     extra_args = ["--max-turns", "50"]
#   }
# }

# Codex through its app-server protocol: one `codex app-server` holds every
# session, as a child (command) or over a WebSocket to an app-server started
# elsewhere with `codex app-server --listen ws://127.0.0.1:4500`. Log in
# once with `codex login` where the app-server runs.
#
# agent "codex" {
#   dialect = "codex-app-server"
#   command = ["codex", "app-server"]
#   # websocket { url = "ws://127.0.0.1:4500" }   # instead of command
#   options {
#     # The model of new threads. Default: Codex's config.
#     model = "gpt-5-codex"
#     # The mode of new threads: read-only, auto or full-access. Default: Codex's config.
#     mode = "auto"
#   }
# }

# Durable sessions (docs/sessions.md): on unless sessions = false.
# state_dir         = "/srv/acp-sessions"  # default: $XDG_STATE_HOME/acp-bridge (a relative path is taken from this file's directory)
# session_idle      = "15m"     # close an agent session idle this long ("off": never)
# history_preamble  = true      # prime a new agent session with the transcript
# list_all_sessions = false     # session/list lists every recorded session, not only this agent's
# session_max_age   = "720h"    # delete transcripts not updated for this long
# max_sessions      = 1000      # keep at most this many transcripts
# session_max_bytes = "64MiB"   # cap one transcript
