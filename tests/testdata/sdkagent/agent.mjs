// agent.mjs is a small ACP v1 agent built on the official TypeScript SDK,
// @agentclientprotocol/sdk 2.4.0, for acp-bridge's end-to-end tests. It
// keeps every rule the SDK enforces (above all: nothing but initialize is
// served before initialize has been answered), so the bridge is tested
// against what real SDK-built agents do, not against our own fakes.
//
//   node agent.mjs [--name NAME] [--load-session]
//
// It speaks ACP over stdio. initialize advertises session/resume, and
// loadSession with --load-session; session/new numbers sessions per process
// (s-1, s-2…); session/load and session/resume accept only ids this process
// created (else the SDK's "Resource not found", -32002); session/load
// replays the session's history. (Without --load-session a bridge serves
// session/load from its own transcripts and re-attaches with
// session/resume, which is what the tests exercise.)
//
// Every request the SDK refuses because it came before the initialize
// answer is also reported on stderr, in a line starting RefusedMarker, so
// that a test sees it even when the bridge recovers from the refusal.
//
// session/prompt answers the prompt's last text block, one
// agent_message_chunk per word, behind a first chunk "[NAME pid=PID] " that
// tells a test which agent and which process answered:
//
//   recall    "NAME recalls: " and the text of the earlier text blocks of
//             the prompt (the history preamble acp-bridge adds when it
//             moves a conversation to a new agent session), or "nothing"
//   slow      a chunk "tick-N" every 20 ms until session/cancel, then
//             stopReason cancelled
//   other     "NAME heard: " and the words
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const RefusedMarker = "sdk-agent: refused before initialize:";
const name = option("--name") ?? "sdk-agent";
const loadSession = process.argv.includes("--load-session");
const sessions = new Map(); // session id → { history: update[], turn: AbortController | null }
let created = 0;

function option(flag) {
  const i = process.argv.indexOf(flag);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function known(sessionId) {
  const s = sessions.get(sessionId);
  if (!s) throw acp.RequestError.sessionNotFound(sessionId);
  return s;
}

function chunk(text) {
  return { sessionUpdate: "agent_message_chunk", content: { type: "text", text } };
}

async function say(client, sessionId, s, update) {
  s.history.push(update);
  await client.notify(acp.methods.client.session.update, { sessionId, update });
}

const words = (text) => text.split(/\s+/).filter(Boolean);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const app = acp
  .agent({ name })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession, sessionCapabilities: { resume: {} } },
    agentInfo: { name, version: "2.4.0" },
    authMethods: [],
  }))
  .onRequest(acp.methods.agent.session.new, () => {
    const sessionId = `s-${++created}`;
    sessions.set(sessionId, { history: [], turn: null });
    return { sessionId };
  })
  .onRequest(acp.methods.agent.session.load, async ({ params, client }) => {
    const s = known(params.sessionId);
    for (const update of s.history) {
      await client.notify(acp.methods.client.session.update, { sessionId: params.sessionId, update });
    }
    return {};
  })
  .onRequest(acp.methods.agent.session.resume, ({ params }) => {
    known(params.sessionId);
    return {};
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const { sessionId } = params;
    const s = known(sessionId);
    const texts = params.prompt.filter((b) => b.type === "text").map((b) => b.text);
    const text = texts.at(-1) ?? "";
    for (const t of texts) s.history.push({ sessionUpdate: "user_message_chunk", content: { type: "text", text: t } });
    const turn = new AbortController();
    s.turn = turn;
    try {
      await say(client, sessionId, s, chunk(`[${name} pid=${process.pid}] `));
      if (text.trim() === "slow") {
        for (let i = 0; !turn.signal.aborted; i++) {
          await say(client, sessionId, s, chunk(`tick-${i}`));
          await sleep(20);
        }
        return { stopReason: "cancelled" };
      }
      const context = texts.slice(0, -1).join(" ");
      const answer =
        text.trim() === "recall"
          ? [`${name} recalls:`, ...words(context || "nothing")]
          : [`${name} heard:`, ...words(text)];
      for (const [i, w] of answer.entries()) {
        await say(client, sessionId, s, chunk(i === 0 ? w : ` ${w}`));
      }
      return { stopReason: turn.signal.aborted ? "cancelled" : "end_turn" };
    } finally {
      s.turn = null;
    }
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    sessions.get(params.sessionId)?.turn?.abort();
  });

// Each write of the SDK is one whole message: watch them for the SDK's
// refusals of requests that came before initialize was answered.
const decoder = new TextDecoder();
const watched = new TransformStream({
  transform(bytes, out) {
    const line = decoder.decode(bytes);
    if (line.includes("ACP connection must be initialized before")) {
      process.stderr.write(`${RefusedMarker} ${line.trim()}\n`);
    }
    out.enqueue(bytes);
  },
});
void watched.readable.pipeTo(Writable.toWeb(process.stdout));
app.connect(acp.ndJsonStream(watched.writable, Readable.toWeb(process.stdin)));
// Exit when the client closes stdin, as an editor's agent must.
process.stdin.on("end", () => process.exit(0));
