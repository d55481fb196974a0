// editor.mjs is an ACP v2 editor built on the official TypeScript SDK's v2
// client, @agentclientprotocol/sdk 2.4.0 (experimental/v2), for acp-bridge's
// end-to-end tests of the v2 front. It speaks ACP v2 on stdio to a bridge
// the test runs, so every message it receives is parsed and validated by
// the SDK, which rejects (and may close the connection on) a message that is
// not v2.
//
// The environment drives it:
//
//   V2E_STEPS   JSON array of steps, run in order after initialize and
//               session/new in V2E_CWD:
//                 {"prompt": TEXT}                    a turn, to its idle end
//                 {"prompt": TEXT, "cancelAfter": MS} a turn cancelled after MS
//                 {"setConfig": ID, "value": V}       session/set_config_option
//   V2E_RESUME  a session id to list and resume instead of session/new,
//               with a replay of its history when V2E_REPLAY is 1
//   V2E_RESULT  file the outcome is written to, as JSON: the initialize
//               answer, the session, each step's result (a turn's
//               acknowledgement, stop reason, chunk texts and message ids,
//               the text of the user message echoed under the
//               acknowledgement's messageId, null when none was),
//               the permission requests, every raw line received, and the
//               first error.
import { Readable, Writable } from "node:stream";
import { writeFileSync } from "node:fs";
import { client, ndJsonStream } from "@agentclientprotocol/sdk/experimental/v2";

const steps = JSON.parse(process.env.V2E_STEPS ?? "[]");
const result = { steps: [], permissions: [], received: [], updates: [] };
let pendingLine = "";
const decoder = new TextDecoder();

// Record every raw line on its way to the SDK.
const tap = new TransformStream({
  transform(chunk, controller) {
    pendingLine += decoder.decode(chunk, { stream: true });
    let i;
    while ((i = pendingLine.indexOf("\n")) >= 0) {
      result.received.push(pendingLine.slice(0, i));
      pendingLine = pendingLine.slice(i + 1);
    }
    controller.enqueue(chunk);
  },
});
const input = Readable.toWeb(process.stdin).pipeThrough(tap);
const output = Writable.toWeb(process.stdout);

// Session updates have no fixed order relative to responses (the SDK
// dispatches them independently), so ends are found in the updates
// themselves: waitState resolves at the first state_update of one of the
// wanted states seen from now on, after the states listed in after (in
// order) have been seen.
const stateWaiters = [];

function waitState(sessionId, want, after = []) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${want} state_update within 10 s`)), 10000);
    stateWaiters.push({ sessionId, want, after: [...after], resolve: (u) => { clearTimeout(timer); resolve(u); } });
  });
}

const app = client()
  .onRequest("session/request_permission", ({ params }) => {
    result.permissions.push(params);
    return { outcome: { outcome: "selected", optionId: params.options[0].optionId } };
  })
  .onNotification("session/update", ({ params }) => {
    result.updates.push(params.update);
    const u = params.update;
    if (u.sessionUpdate !== "state_update") {
      return;
    }
    for (const w of [...stateWaiters]) {
      if (w.sessionId !== params.sessionId) {
        continue;
      }
      if (w.after.length > 0) {
        if (w.after[0] === u.state) {
          w.after.shift();
        }
        continue;
      }
      if (u.state === w.want) {
        stateWaiters.splice(stateWaiters.indexOf(w), 1);
        w.resolve(u);
      }
    }
  });

try {
  await app.connectWith(ndJsonStream(output, input), async (ctx) => {
    result.initialize = await ctx.request("initialize", {
      protocolVersion: 2,
      info: { name: "v2-test-editor", version: "1.0.0" },
      capabilities: {},
    });
    let sid;
    if (process.env.V2E_RESUME) {
      // A session an earlier bridge recorded: listed, then resumed with
      // (V2E_REPLAY=1) or without a replay of its history.
      sid = process.env.V2E_RESUME;
      result.list = await ctx.request("session/list", {});
      const params = { sessionId: sid, cwd: process.env.V2E_CWD, mcpServers: [] };
      if (process.env.V2E_REPLAY === "1") {
        params.replayFrom = { type: "start" };
      }
      const snapshot = waitState(sid, "idle");
      result.resume = await ctx.request("session/resume", params);
      await snapshot; // sent after the replay, before the answer
      result.replayed = result.updates.slice();
    } else {
      const session = await ctx.request("session/new", { cwd: process.env.V2E_CWD, mcpServers: [] });
      result.session = session;
      sid = session.sessionId;
    }
    for (const step of steps) {
      if (step.setConfig) {
        result.steps.push(await ctx.request("session/set_config_option", {
          sessionId: sid, configId: step.setConfig, type: "id", value: step.value,
        }));
        continue;
      }
      const from = result.updates.length;
      const ended = waitState(sid, "idle", ["running"]);
      const ack = await ctx.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: step.prompt }] });
      if (step.cancelAfter !== undefined) {
        await new Promise((r) => setTimeout(r, step.cancelAfter));
        await ctx.notify("session/cancel", { sessionId: sid });
      }
      const end = await ended;
      const turn = result.updates.slice(from);
      const chunks = turn.filter((u) => u.sessionUpdate === "agent_message_chunk");
      // The user message the prompt inserted, as echoed under the
      // acknowledgement's messageId: an upsert replaces, a chunk appends.
      let echo = null;
      for (const u of turn) {
        if (u.messageId !== ack.messageId) continue;
        if (u.sessionUpdate === "user_message") {
          echo = u.content === undefined ? (echo ?? "") : (u.content ?? []).map((b) => b.text ?? "").join("");
        } else if (u.sessionUpdate === "user_message_chunk") {
          echo = (echo ?? "") + (u.content.text ?? "");
        }
      }
      result.steps.push({
        prompt: step.prompt,
        ack,
        stopReason: end.stopReason ?? null,
        error: end.error ?? null,
        text: chunks.map((u) => u.content.text ?? "").join(""),
        messageIds: [...new Set(chunks.map((u) => u.messageId))],
        echo,
        kinds: turn.map((u) => u.sessionUpdate + (u.state ? ":" + u.state : "")),
      });
    }
  });
} catch (err) {
  result.error = String(err?.stack ?? err);
}
writeFileSync(process.env.V2E_RESULT, JSON.stringify(result));
process.exit(0);
