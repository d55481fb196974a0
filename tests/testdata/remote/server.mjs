// server.mjs serves an ACP agent built on the official TypeScript SDK
// (@agentclientprotocol/sdk 2.4.0) with the SDK's own remote transport
// server, experimental/server's AcpServer: Streamable HTTP, and WebSocket
// through the `ws` package, at one endpoint.
//
//   node server.mjs
//
// prints "listening http://127.0.0.1:PORT/acp" on stdout once it listens.
// One agent per connection; session/new numbers sessions per connection
// (s-1, s-2…). session/prompt answers its text:
//
//   permission  asks session/request_permission and says "permission:OPTION"
//               (or "permission:cancelled")
//   slow        a chunk "tick-N" every 20 ms until session/cancel, then
//               stopReason cancelled
//   other       one agent_message_chunk per word, "heard:" first
import http from "node:http";
import * as acp from "@agentclientprotocol/sdk";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import { createNodeHttpHandler, createNodeWebSocketUpgradeHandler } from "@agentclientprotocol/sdk/experimental/node";
import { WebSocketServer } from "ws";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const chunk = (text) => ({ sessionUpdate: "agent_message_chunk", content: { type: "text", text } });

function createAgent() {
  const turns = new Map(); // session id → AbortController of its turn
  let created = 0;
  return acp
    .agent({ name: "sdk-remote-agent" })
    .onRequest(acp.methods.agent.initialize, () => ({
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: {},
      agentInfo: { name: "sdk-remote-agent", version: "2.4.0" },
      authMethods: [],
    }))
    .onRequest(acp.methods.agent.session.new, () => {
      const sessionId = `s-${++created}`;
      turns.set(sessionId, null);
      return { sessionId };
    })
    .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
      const { sessionId } = params;
      const text = params.prompt.filter((b) => b.type === "text").map((b) => b.text).join(" ").trim();
      const say = (t) => client.notify(acp.methods.client.session.update, { sessionId, update: chunk(t) });
      const turn = new AbortController();
      turns.set(sessionId, turn);
      try {
        if (text === "permission") {
          const r = await client.request(acp.methods.client.session.requestPermission, {
            sessionId,
            toolCall: { toolCallId: "perm-1", title: "Run a thing" },
            options: [
              { optionId: "allow-once", name: "Allow once", kind: "allow_once" },
              { optionId: "reject-once", name: "Reject", kind: "reject_once" },
            ],
          });
          await say(r.outcome.outcome === "selected" ? `permission:${r.outcome.optionId}` : "permission:cancelled");
          return { stopReason: "end_turn" };
        }
        if (text === "slow") {
          for (let i = 0; !turn.signal.aborted; i++) {
            await say(`tick-${i}`);
            await sleep(20);
          }
          return { stopReason: "cancelled" };
        }
        for (const [i, w] of ["heard:", ...text.split(/\s+/)].entries()) {
          await say(i === 0 ? w : ` ${w}`);
        }
        return { stopReason: "end_turn" };
      } finally {
        turns.set(sessionId, null);
      }
    })
    .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
      turns.get(params.sessionId)?.abort();
    });
}

const server = new AcpServer({ createAgent });
const handler = createNodeHttpHandler(server);
const httpServer = http.createServer((req, res) => {
  if (new URL(req.url, "http://x").pathname !== "/acp") {
    res.writeHead(404).end();
    return;
  }
  handler(req, res);
});
httpServer.on("upgrade", createNodeWebSocketUpgradeHandler(server, new WebSocketServer({ noServer: true })));
httpServer.listen(0, "127.0.0.1", () => {
  process.stdout.write(`listening http://127.0.0.1:${httpServer.address().port}/acp\n`);
});
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
