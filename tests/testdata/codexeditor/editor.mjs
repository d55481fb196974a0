// editor.mjs is an ACP v1 editor built on the official TypeScript SDK,
// @agentclientprotocol/sdk 2.4.0, for acp-bridge's end-to-end test of the
// codex-app-server dialect with the real Codex CLI. It speaks ACP on stdio
// to the bridge the test runs, so every message it receives is parsed and
// validated by the SDK. In CODEX_CWD it runs initialize, session/new, the
// prompts "think, then say hello" and "run the tool" (the permission
// allowed once), and "slow", cancelled once it has streamed its first
// words. CODEX_RESULT names the file the outcome is written to, as JSON:
// the modes, the stop reasons, the texts, the permission options and the
// first error.
import { Readable, Writable } from "node:stream";
import { writeFileSync } from "node:fs";
import * as acp from "@agentclientprotocol/sdk";

const result = { stops: [], texts: [], thoughts: [], permissions: [], updates: [], error: null };
let firstWords;
const worked = new Promise((resolve) => (firstWords = resolve));

const app = acp
  .client({ name: "codex-e2e" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    const u = params.update;
    result.updates.push(u.sessionUpdate);
    if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") {
      result.texts.push(u.content.text);
      if (u.content.text === "Working") firstWords();
    }
    if (u.sessionUpdate === "agent_thought_chunk" && u.content.type === "text") result.thoughts.push(u.content.text);
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    result.permissions.push(params.options.map((o) => `${o.kind}:${o.optionId}`));
    const once = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: once.optionId } };
  });

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
try {
  await app.connectWith(stream, async (agent) => {
    const init = await agent.request(acp.methods.agent.initialize, {
      protocolVersion: 1,
      clientCapabilities: {},
      clientInfo: { name: "codex-e2e", version: "0.0.0" },
    });
    result.agent = init.agentInfo?.name;
    const s = await agent.request(acp.methods.agent.session.new, { cwd: process.env.CODEX_CWD, mcpServers: [] });
    result.modes = s.modes.availableModes.map((m) => m.id);
    const prompt = (text) =>
      agent.request(acp.methods.agent.session.prompt, { sessionId: s.sessionId, prompt: [{ type: "text", text }] });
    result.stops.push((await prompt("think, then say hello")).stopReason);
    result.stops.push((await prompt("run the tool")).stopReason);
    const slow = prompt("slow");
    await worked;
    await agent.notify(acp.methods.agent.session.cancel, { sessionId: s.sessionId });
    result.stops.push((await slow).stopReason);
  });
} catch (e) {
  result.error = String(e?.stack ?? e);
}
writeFileSync(process.env.CODEX_RESULT, JSON.stringify(result));
process.exit(0);
