# ZeroClaw's first `zeroclaw acp`, added in March 2026 by
# https://github.com/zeroclaw-labs/zeroclaw/pull/4610 (its server is
# src/channels/acp_server.rs in that repository): stdio JSON-RPC with
# snake_case fields and session/event notifications. Tool events carry no id: a tool_result is paired with the
# oldest open tool_call of the same name. There is no cancel (session/stop
# tears the session down), so session/cancel is bridge-side, and
# session/close sends session/stop.

summary  = "ZeroClaw's first `zeroclaw acp`: snake_case session/event JSON-RPC over stdio"
envelope = "jsonrpc"
route    = ["params.session_id"]

request "initialize" {
  method = "initialize"
  params = {}
}

request "session/new" {
  method = "session/new"
  params = { workspace_dir = session.cwd }
  reply {
    keep = { agent_session = "result.sessionId" }
  }
}

request "session/prompt" {
  method = "session/prompt"
  params = { session_id = session.agent_session, prompt = prompt.text }
  reply {
    # Redundant with the chunks when the agent streamed them.
    final_message = frame.result.content
  }
}

request "session/close" {
  method = "session/stop"
  params = { session_id = session.agent_session }
}

event "thinking" {
  match   = { method = "session/event", "params.type" = "thinking" }
  thought = frame.params.content
}

event "chunk" {
  match   = { method = "session/event", "params.type" = "chunk" }
  message = frame.params.content
}

event "tool-call" {
  match = { method = "session/event", "params.type" = "tool_call" }
  tool {
    open      = true
    name      = frame.params.name
    title     = frame.params.name
    kind      = map(frame.params.name, { shell = "execute", file_read = "read", file_write = "edit", memory_recall = "search" }, "other")
    raw_input = frame.params.args
    status    = "in_progress"
  }
}

event "tool-result" {
  match = { method = "session/event", "params.type" = "tool_result" }
  tool {
    name   = frame.params.name
    output = frame.params.output
    status = "completed"
    close  = true
  }
}
