# The stdio design agent/createSession, agent/prompt, agent/update that the
# Mini-Agent fork planned for its VS Code integration: JSON-RPC 2.0 with its
# own method names, over stdio or a WebSocket. The server sends an
# "initialized" notification after answering initialize. Source: the fork's
# archived design documents, in https://github.com/Zazzles2908/Mini-Agent_ACP
# under documents/10_ARCHIVE/vscode-extension/ (QUICK_REFERENCE.md lists the
# methods and the message shapes).
#
# updateType tool_call and tool_result were named but never specified; this
# profile reads the tool's id, name and arguments from params.data
# ({"id","name","arguments"}) and pairs a result with its call by data.id,
# or by order and name when there is no id.

summary  = "Mini-Agent's stdio design: agent/createSession, agent/prompt, agent/update (JSON-RPC 2.0)"
envelope = "jsonrpc"
route    = ["params.sessionId"]

request "initialize" {
  method = "initialize"
  params = { protocolVersion = "1.0", capabilities = {}, clientInfo = { name = "acp-bridge" } }
}

request "session/new" {
  method = "agent/createSession"
  params = { workspaceDir = session.cwd, environmentVars = {} }
  reply {
    keep = { agent_session = "result.sessionId" }
  }
}

request "session/prompt" {
  method = "agent/prompt"
  params = { sessionId = session.agent_session, prompt = prompt.text }
  reply {
    # The final content repeats what "response" updates streamed.
    final_message = frame.result.content
  }
}

cancel {
  send = { jsonrpc = "2.0", id = id, method = "agent/cancelSession", params = { sessionId = session.agent_session } }
}

event "initialized" {
  match = { method = "initialized" }
}

event "thinking" {
  match   = { method = "agent/update", "params.updateType" = "thinking" }
  thought = frame.params.content
}

event "response" {
  match   = { method = "agent/update", "params.updateType" = "response" }
  message = frame.params.content
}

event "tool-call" {
  match = { method = "agent/update", "params.updateType" = "tool_call" }
  tool {
    open      = true
    key       = frame.params.data.id
    name      = frame.params.data.name
    title     = default(frame.params.content, frame.params.data.name)
    kind      = map(frame.params.data.name, { bash = "execute", shell = "execute", read_file = "read", write_file = "edit", edit_file = "edit", search = "search" }, "other")
    raw_input = frame.params.data.arguments
    status    = "in_progress"
  }
}

event "tool-result" {
  match = { method = "agent/update", "params.updateType" = "tool_result" }
  tool {
    key        = frame.params.data.id
    name       = frame.params.data.name
    output     = frame.params.content
    raw_output = frame.params.data
    status     = default(frame.params.data.status, "completed")
    close      = true
  }
}
