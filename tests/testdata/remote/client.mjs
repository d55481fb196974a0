// client.mjs is an ACP editor built on the official TypeScript SDK,
// @agentclientprotocol/sdk 2.4.0, speaking the SDK's own remote transport
// clients (experimental/http-client, experimental/ws-client) to an ACP
// endpoint such as `acp-bridge serve`. It runs one whole session against
// the fake agent of acp-bridge's tests:
//
//   node client.mjs http|ws URL [SESSIONS]
//
// initialize, then per session (1 unless SESSIONS): session/new, the
// streamed prompt "stream 5", the prompt "permission" (allowed once), and
// "wait-cancel" cancelled with session/cancel once it has streamed a tick.
//
// Every message on the wire is printed to stdout, one line each: "> JSON"
// for what it sends, "< JSON" for what it receives, so that the Go test can
// check each against the ACP schema; the last line is "RESULT JSON" with
// what each session saw. ACP_TOKEN in the environment is sent as a bearer
// token. The WebSocket is the `ws` package's, which Node 18 and 20 need
// (they have no WebSocket of their own) and which sends headers.
import * as acp from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import WebSocket from "ws";

const [transport, url, nSessions = "1"] = process.argv.slice(2);
const headers = process.env.ACP_TOKEN ? { Authorization: `Bearer ${process.env.ACP_TOKEN}` } : {};
const wire = transport === "ws" ? createWebSocketStream(url, { headers, WebSocket }) : createHttpStream(url, { headers });

const print = (dir, m) => process.stdout.write(`${dir} ${JSON.stringify(m)}\n`);
const readable = wire.readable.pipeThrough(
  new TransformStream({ transform(m, c) { print("<", m); c.enqueue(m); } }),
);
const out = new TransformStream({ transform(m, c) { print(">", m); c.enqueue(m); } });
void out.readable.pipeTo(wire.writable).catch(() => {});

const texts = new Map(); // session id → text chunks, in order
const ticked = new Map(); // session id → resolve of the first tick
const app = acp
  .client({ name: "remote-e2e" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    const u = params.update;
    if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") {
      if (!texts.has(params.sessionId)) texts.set(params.sessionId, []);
      texts.get(params.sessionId).push(u.content.text);
      if (u.content.text.startsWith("tick-")) ticked.get(params.sessionId)?.();
    }
  })
  .onRequest(acp.methods.client.session.requestPermission, () => ({
    outcome: { outcome: "selected", optionId: "allow-once" },
  }));

const result = await app.connectWith({ readable, writable: out.writable }, async (agent) => {
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: {},
    clientInfo: { name: "remote-e2e", version: "0.0.0" },
  });
  const one = async () => {
    const { sessionId } = await agent.request(acp.methods.agent.session.new, { cwd: "/tmp", mcpServers: [] });
    const prompt = (text) => agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
    const streamed = await prompt("stream 5");
    const permission = await prompt("permission");
    const tick = new Promise((resolve) => ticked.set(sessionId, resolve));
    const cancelled = prompt("wait-cancel");
    await tick;
    await agent.notify(acp.methods.agent.session.cancel, { sessionId });
    const c = await cancelled;
    return { sessionId, stops: [streamed.stopReason, permission.stopReason, c.stopReason] };
  };
  const sessions = await Promise.all(Array.from({ length: Number(nSessions) }, one));
  for (const s of sessions) s.texts = texts.get(s.sessionId) ?? [];
  return { agent: init.agentInfo?.name, sessions };
});
process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
process.exit(0);
