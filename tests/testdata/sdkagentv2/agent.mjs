// agent.mjs is a small ACP v2 agent built on the official TypeScript SDK's
// v2 API (@agentclientprotocol/sdk 2.4.0, experimental/v2), for
// acp-bridge's end-to-end tests of v2 agents. It speaks v2 only: the SDK
// answers an initialize for any other version with an error, and validates
// every message it receives against the v2 schema, so a bridge that sends a
// v1 shape to it fails here.
//
//   node agent.mjs
//
// session/prompt is acknowledged at once ({messageId}); the turn runs after
// the acknowledgement and ends with an idle state_update. What it does
// depends on the prompt's last text block:
//
//   upsert    chunks "Hel", "lo" of message m, then the whole message
//             "Hello, world" as an agent_message upsert
//   tool      a tool call (upserts and a content chunk), a permission
//             request about it, then completed or failed by the answer;
//             cancelled, with the turn, when session/cancel came first
//   seam      the seam matrix's turn (seam_matrix_e2e_test.go): the chunk
//             "seam-before", tool call seam-1 (pending), a permission
//             request about it; allowed once: completed and the chunk
//             "seam-after" (another message), otherwise failed and
//             "seam-refused"
//   command   a permission request about a command (no tool call)
//   slow      a chunk "tick-N" every 20 ms until session/cancel, then idle
//             with stopReason cancelled
//   late      like slow, and after its idle one more chunk "late-after-idle"
//             (an agent that misbehaves: the bridge must drop it)
//   ask-late  like slow, and after its idle a permission request; its
//             outcome is logged on stderr ("late permission: OUTCOME")
//   stubborn  a chunk "stubborn-N" every 20 ms for 1 s whatever the
//             editor says, then idle with stopReason end_turn
//   fail      idle with stopReason error and the error "model overloaded"
//   refuse    the prompt itself refused: session not found
//   extras    a plan, a terminal output chunk and background work (which
//             v1 cannot show), a stop reason "_handoff"
//   other     "heard: " and the words, one chunk each, then the whole
//             message again as an upsert
//
// A prompt for a session whose turn is still running is refused
// (invalid request): the agent runs one turn per session at a time.
//
// Every message the agent receives is logged on stderr as one line starting
// "sdk-agent-v2: recv", for tests that check what reached it.
//
// SDK_AGENT_V2_DEFECTS (comma-separated) seeds defects, for the tests of
// `acp-bridge check --protocol 2` and `compare`. The defective messages are
// written straight to stdout, past the SDK, which would not send them:
//
//   no-stop-reason       a turn's closing idle state_update has no stopReason
//   answer-notification  every notification is answered with error -32601
//   invalid-update       message chunks carry their text as a bare string,
//                        not a content block
//   short-message        the whole-message upsert that ends a reply drops
//                        its last word (valid v2, a different answer)
//   no-echo              a prompt is never echoed (no user_message under the
//                        acknowledgement's messageId)
//   overlap              a prompt during a turn runs alongside it
//   preempt              a prompt during a turn ends that turn (idle,
//                        cancelled, as if the client had cancelled it) and
//                        runs instead
//   mute-initialize      initialize is never answered
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/experimental/v2";

const defects = new Set((process.env.SDK_AGENT_V2_DEFECTS ?? "").split(",").filter(Boolean));
const sessions = new Map(); // id → { turn: AbortController | null, history: update[] }
let created = 0;
let messages = 0;

function known(sessionId) {
  const s = sessions.get(sessionId);
  if (!s) throw acp.RequestError.sessionNotFound(sessionId);
  return s;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const words = (text) => text.split(/\s+/).filter(Boolean);

// raw writes one message past the SDK (seeded defects).
function raw(msg) {
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...msg }) + "\n");
}

async function send(client, sessionId, update) {
  const s = sessions.get(sessionId);
  if (s && update.sessionUpdate !== "state_update") s.history.push(update);
  if (update.sessionUpdate === "state_update" && update.state === "idle" && s) {
    s.turn = null; // the next prompt may follow the idle update at once
  }
  if (update.sessionUpdate === "state_update" && update.state === "idle" && defects.has("no-stop-reason")) {
    const { stopReason, ...rest } = update;
    return raw({ method: "session/update", params: { sessionId, update: rest } });
  }
  if (update.sessionUpdate === "agent_message_chunk" && defects.has("invalid-update")) {
    return raw({ method: "session/update", params: { sessionId, update: { ...update, content: update.content.text } } });
  }
  await client.notify(acp.methods.client.session.update, { sessionId, update });
}

const idle = (stopReason, extra = {}) => ({ sessionUpdate: "state_update", state: "idle", stopReason, ...extra });

async function runTurn(client, sessionId, s, text, userMessageId, turn) {
  const say = (update) => send(client, sessionId, update);
  await say({ sessionUpdate: "state_update", state: "running" });
  if (!defects.has("no-echo")) {
    await say({ sessionUpdate: "user_message", messageId: userMessageId, content: [{ type: "text", text }] });
  }
  const m = `m-${++messages}`;
  const chunk = (t) => say({ sessionUpdate: "agent_message_chunk", messageId: m, content: { type: "text", text: t } });
  switch (text.trim()) {
    case "upsert":
      await chunk("Hel");
      await chunk("lo");
      await say({ sessionUpdate: "agent_message", messageId: m, content: [{ type: "text", text: "Hello, world" }] });
      return say(idle("end_turn"));
    case "tool": {
      const id = `call-${messages}`;
      await say({ sessionUpdate: "tool_call_update", toolCallId: id, name: "write_file", kind: "edit", status: "pending", rawInput: { path: "/tmp/a" } });
      await say({ sessionUpdate: "tool_call_update", toolCallId: id, title: "Write /tmp/a" });
      await say({ sessionUpdate: "tool_call_content_chunk", toolCallId: id, content: { type: "content", content: { type: "text", text: "new contents" } } });
      await say({ sessionUpdate: "state_update", state: "requires_action" });
      const answer = await client.request(acp.methods.client.session.requestPermission, {
        sessionId,
        title: "Write /tmp/a?",
        subject: { type: "tool_call", toolCall: { toolCallId: id } },
        options: [
          { optionId: "yes", name: "Allow", kind: "allow_once" },
          { optionId: "no", name: "Reject", kind: "reject_once" },
        ],
      });
      // A "cancelled" outcome is the client cancelling the turn; the SDK
      // may run the session/cancel handler only after this answer.
      if (turn.signal.aborted || answer.outcome.outcome === "cancelled") {
        await say({ sessionUpdate: "tool_call_update", toolCallId: id, status: "cancelled" });
        return say(idle("cancelled"));
      }
      const allowed = answer.outcome.outcome === "selected" && answer.outcome.optionId === "yes";
      await say({ sessionUpdate: "state_update", state: "running" });
      await say({ sessionUpdate: "tool_call_update", toolCallId: id, status: allowed ? "completed" : "failed", rawOutput: { allowed } });
      await chunk(allowed ? "wrote it" : "did not write it");
      return say(idle("end_turn"));
    }
    case "seam": {
      await chunk("seam-before");
      await say({ sessionUpdate: "tool_call_update", toolCallId: "seam-1", title: "Run the seam tool", kind: "execute", status: "pending" });
      await say({ sessionUpdate: "state_update", state: "requires_action" });
      const answer = await client.request(acp.methods.client.session.requestPermission, {
        sessionId,
        title: "Run the seam tool?",
        subject: { type: "tool_call", toolCall: { toolCallId: "seam-1" } },
        options: [
          { optionId: "allow-once", name: "Allow once", kind: "allow_once" },
          { optionId: "reject-once", name: "Reject", kind: "reject_once" },
        ],
      });
      const allowed = answer.outcome.outcome === "selected" && answer.outcome.optionId === "allow-once";
      await say({ sessionUpdate: "state_update", state: "running" });
      await say({ sessionUpdate: "tool_call_update", toolCallId: "seam-1", status: allowed ? "completed" : "failed" });
      await say({ sessionUpdate: "agent_message_chunk", messageId: `m-${++messages}`, content: { type: "text", text: allowed ? "seam-after" : "seam-refused" } });
      return say(idle("end_turn"));
    }
    case "command": {
      const answer = await client.request(acp.methods.client.session.requestPermission, {
        sessionId,
        title: "Run a command",
        subject: { type: "command", command: "make test", cwd: "/tmp" },
        options: [{ optionId: "ok", name: "Run", kind: "allow_once" }],
      });
      await chunk(`command: ${answer.outcome.outcome}`);
      return say(idle("end_turn"));
    }
    case "slow":
      for (let i = 0; !turn.signal.aborted; i++) {
        await chunk(`tick-${i}`);
        await sleep(20);
      }
      return say(idle("cancelled"));
    case "late":
      for (let i = 0; !turn.signal.aborted; i++) {
        await chunk(`tick-${i}`);
        await sleep(20);
      }
      await say(idle("cancelled"));
      return chunk("late-after-idle");
    case "ask-late": {
      for (let i = 0; !turn.signal.aborted; i++) {
        await chunk(`tick-${i}`);
        await sleep(20);
      }
      await say(idle("cancelled"));
      const answer = await client.request(acp.methods.client.session.requestPermission, {
        sessionId,
        title: "Too late?",
        subject: { type: "command", command: "true", cwd: "/tmp" },
        options: [{ optionId: "ok", name: "Run", kind: "allow_once" }],
      });
      process.stderr.write(`sdk-agent-v2: late permission: ${answer.outcome.outcome}\n`);
      return;
    }
    case "stubborn":
      for (let i = 0; i < 50; i++) {
        await chunk(`stubborn-${i}`);
        await sleep(20);
      }
      return say(idle("end_turn"));
    case "fail":
      await chunk("trying");
      return say(idle("error", { error: { code: -32603, message: "model overloaded", data: { retryAfter: 5 } } }));
    case "extras":
      await say({ sessionUpdate: "plan_update", plan: { type: "items", planId: "p-1", entries: [{ content: "look", priority: "high", status: "completed" }] } });
      await say({ sessionUpdate: "terminal_output_chunk", terminalId: "t-1", data: "x" });
      await chunk("extras");
      return say(idle("_handoff", { background: [{ type: "tool_call", toolCallId: "bg-1" }] }));
    default: {
      const answer = ["heard:", ...words(text)];
      let whole = "";
      for (const [i, w] of answer.entries()) {
        const t = i === 0 ? w : ` ${w}`;
        whole += t;
        await chunk(t);
      }
      if (defects.has("short-message")) whole = answer.slice(0, -1).join(" ");
      await say({ sessionUpdate: "agent_message", messageId: m, content: [{ type: "text", text: whole }] });
      return say(idle(turn.signal.aborted ? "cancelled" : "end_turn"));
    }
  }
}

const app = acp
  .agent({ name: "sdk-agent-v2" })
  .onRequest(acp.methods.agent.initialize, () => defects.has("mute-initialize") ? new Promise(() => {}) : ({
    protocolVersion: acp.PROTOCOL_VERSION,
    info: { name: "sdk-agent-v2", version: "2.4.0" },
    capabilities: { session: { prompt: { embeddedContext: {} } } },
    authMethods: [],
  }))
  .onRequest(acp.methods.agent.session.new, () => {
    const sessionId = `v2-${++created}`;
    sessions.set(sessionId, { turn: null, history: [] });
    return { sessionId, availableCommands: [{ type: "command", name: "explain", description: "Explain the code" }] };
  })
  .onRequest(acp.methods.agent.session.resume, async ({ params, client }) => {
    const s = known(params.sessionId);
    if (params.replayFrom) {
      for (const update of s.history) {
        await client.notify(acp.methods.client.session.update, { sessionId: params.sessionId, update });
      }
    }
    return {};
  })
  .onRequest(acp.methods.agent.session.list, () => ({
    sessions: [...sessions.keys()].map((sessionId) => ({ sessionId, cwd: "/tmp" })),
  }))
  .onRequest(acp.methods.agent.session.close, ({ params }) => {
    known(params.sessionId);
    sessions.delete(params.sessionId);
    return {};
  })
  .onRequest(acp.methods.agent.session.prompt, ({ params, client }) => {
    const { sessionId } = params;
    if (!sessions.has(sessionId) || params.prompt.some((b) => b.type === "text" && b.text.trim() === "refuse")) {
      throw acp.RequestError.sessionNotFound(sessionId);
    }
    const s = known(sessionId);
    if (s.turn && defects.has("preempt")) s.turn.abort();
    else if (s.turn && !defects.has("overlap")) throw acp.RequestError.invalidRequest({ sessionId }, "a turn is already running in this session");
    const texts = params.prompt.filter((b) => b.type === "text").map((b) => b.text);
    const text = texts.at(-1) ?? "";
    const messageId = `u-${++messages}`;
    const turn = new AbortController();
    s.turn = turn;
    // The acknowledgement goes first; the turn runs after it.
    setTimeout(() => {
      runTurn(client, sessionId, s, text, messageId, turn)
        .catch((err) => process.stderr.write(`sdk-agent-v2: turn failed: ${err?.stack ?? err}\n`))
        .finally(() => {
          if (s.turn === turn) s.turn = null;
        });
    }, 5);
    return { messageId };
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    sessions.get(params.sessionId)?.turn?.abort();
  });

const decoder = new TextDecoder();
const logged = new TransformStream({
  transform(bytes, out) {
    for (const line of decoder.decode(bytes, { stream: true }).split("\n")) {
      if (!line.trim()) continue;
      process.stderr.write(`sdk-agent-v2: recv ${line.trim()}\n`);
      if (defects.has("answer-notification")) {
        let msg;
        try {
          msg = JSON.parse(line);
        } catch {
          continue;
        }
        if (msg && typeof msg.method === "string" && !("id" in msg)) {
          raw({ id: null, error: { code: -32601, message: `Method not found: ${msg.method}` } });
        }
      }
    }
    out.enqueue(bytes);
  },
});
void Readable.toWeb(process.stdin).pipeTo(logged.writable);
const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), logged.readable));
connection.closed.then(() => process.stderr.write("sdk-agent-v2: connection closed\n"));
process.stdin.on("end", () => process.exit(0));
