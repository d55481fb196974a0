// editor.mjs is the seam matrix's editor built on the official TypeScript
// SDK, @agentclientprotocol/sdk 2.4.0 (seam_matrix_e2e_test.go): the v1
// client (the package's root) or the v2 client (experimental/v2), on stdio
// or on the SDK's own Streamable HTTP client (experimental/http-client).
// The SDK parses and validates every message it receives and fails on one
// that is not of its version.
//
// It is a puppet: the Go test connects it to a TCP control socket and
// sends one JSON command per line, {"id":N,"op":"request"|"notify"|"end",
// "method":M,"params":P}; a request is answered {"id":N,"result":R} or
// {"id":N,"error":E}, a notify {"id":N}. Every message it receives from the
// bridge is reported first, as {"event":"recv","msg":MSG}, in the order it
// arrived, so that a request's answer follows the updates sent before it;
// every message it sends, as {"event":"sent","msg":MSG}.
// Permission requests are answered by the editor itself: the first option
// of kind allow_once (else the first option).
//
//   SEAM_CONTROL  HOST:PORT of the control socket
//   SEAM_VERSION  1 or 2
//   SEAM_URL      the endpoint for the HTTP client; stdio when unset
import { Readable, Writable } from "node:stream";
import { connect } from "node:net";
import * as v1 from "@agentclientprotocol/sdk";
import * as v2 from "@agentclientprotocol/sdk/experimental/v2";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";

const [host, port] = process.env.SEAM_CONTROL.split(":");
const control = connect(Number(port), host);
control.setNoDelay(true);
const report = (m) => control.write(JSON.stringify(m) + "\n");

const wire = process.env.SEAM_URL
  ? createHttpStream(process.env.SEAM_URL)
  : v2.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const readable = wire.readable.pipeThrough(
  new TransformStream({ transform(m, c) { report({ event: "recv", msg: m }); c.enqueue(m); } }),
);
const sent = new TransformStream({ transform(m, c) { report({ event: "sent", msg: m }); c.enqueue(m); } });
void sent.readable.pipeTo(wire.writable).catch(() => {});
const stream = { readable, writable: sent.writable };

const choose = ({ params }) => {
  const o = params.options.find((x) => x.kind === "allow_once") ?? params.options[0];
  return { outcome: { outcome: "selected", optionId: o.optionId } };
};
const app = process.env.SEAM_VERSION === "2"
  ? v2.client().onRequest("session/request_permission", choose).onNotification("session/update", () => {})
  : v1.client({ name: "seam-editor" })
    .onRequest(v1.methods.client.session.requestPermission, choose)
    .onNotification(v1.methods.client.session.update, () => {});

let pending = "";
let finish;
const finished = new Promise((r) => { finish = r; });

try {
  await app.connectWith(stream, async (peer) => {
    control.on("data", (chunk) => {
      pending += chunk.toString("utf8");
      let i;
      while ((i = pending.indexOf("\n")) >= 0) {
        const cmd = JSON.parse(pending.slice(0, i));
        pending = pending.slice(i + 1);
        if (cmd.op === "end") {
          finish();
        } else if (cmd.op === "notify") {
          Promise.resolve().then(() => peer.notify(cmd.method, cmd.params)).then(
            () => report({ id: cmd.id }),
            (err) => report({ id: cmd.id, error: { code: err?.code ?? -1, message: String(err?.message ?? err) } }),
          );
        } else {
          Promise.resolve().then(() => peer.request(cmd.method, cmd.params)).then(
            (result) => report({ id: cmd.id, result: result ?? null }),
            (err) => report({ id: cmd.id, error: { code: err?.code ?? -1, message: String(err?.message ?? err), data: err?.data } }),
          );
        }
      }
    });
    control.on("close", () => finish());
    await finished;
  });
} catch (err) {
  report({ event: "error", message: String(err?.stack ?? err) });
}
control.end(() => process.exit(0));
