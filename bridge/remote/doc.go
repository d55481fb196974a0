// Package remote serves ACP to remote editors over the ACP remote transport:
// Streamable HTTP and WebSocket at one endpoint, as the remote-transport RFD
// describes and the TypeScript SDK 2.4.0 implements it
// (@agentclientprotocol/sdk/experimental/server, http-client, ws-client).
// Each accepted connection gets an engine of its own (Server.Engine, which
// the command layer makes a bridge.Bridge serving on an in-memory stdio), so
// every dialect, the shim and durable sessions work remotely as on stdio.
//
// # Wire rules (Streamable HTTP)
//
// All at one path. A POST carries one JSON-RPC message as
// "Content-Type: application/json" (else 415); a body that is not a JSON
// object is 400, a JSON array 400 with a -32600 response (ACP has no
// batches), a body over the message limit 413.
//
//   - POST initialize without Acp-Connection-Id opens a connection: the
//     answer is 200 with the initialize response as its JSON body and the new
//     Acp-Connection-Id header. A failed initialize is answered the same way
//     (200, the JSON-RPC error, a connection id); the connection stays until
//     DELETE or idle. Initialize with an Acp-Connection-Id is a message of
//     that connection like any other (202, its answer on the connection
//     stream): the engine answers a repeated initialize as on stdio, where
//     the SDK's own server refuses it with 400.
//   - Any other POST needs Acp-Connection-Id (400 without it, 404 when the
//     connection is unknown or gone) and is answered 202 with no body once the
//     engine has taken the message; what the message causes comes on SSE.
//     A message naming a session (params.sessionId) may carry
//     Acp-Session-Id; when both are given they must agree (400). A response
//     to an agent request that was delivered on a session's stream may name
//     that session, and no other (400). (The SDK's server requires the
//     header on session-scoped messages; this one, fronting engines that
//     route by params.sessionId, is no stricter than it needs to be.)
//   - GET with "Accept: text/event-stream" and Acp-Connection-Id opens the
//     connection's SSE stream; with Acp-Session-Id too, that session's
//     stream. One receiver per stream (409 for a second). Each event is
//     "data: <one JSON-RPC message>\n\n"; ":\n\n" every 15 s keeps an idle
//     stream open. A stream ends when its connection does.
//   - DELETE with Acp-Connection-Id closes the connection (202; 404 when
//     unknown): its engine sees the end of its input, answers what is still
//     pending and stops.
//
// Routing of the engine's output follows the SDK: a response goes where its
// request came from (the session's stream for a request that named a
// session, except session/load, whose answer goes to the connection
// stream); a request or notification naming a session goes to that
// session's stream, which buffers until its receiver attaches; anything
// else to the connection stream. A session's history goes with the answer
// that ends it, ahead of it on the same stream: while a session/load is
// unanswered, everything naming its session goes to the connection stream,
// so a client reading only that stream, or both, gets the whole replay
// before the answer; session/resume's replay and answer both go to the
// session's stream. A replay streams like any output (MaxBuffered holds the
// engine until the client reads), so one of any size is answered.
//
// # Wire rules (WebSocket)
//
// GET with "Upgrade: websocket" at the same path. The 101 response carries
// Acp-Connection-Id (for logs and load-balancer affinity; nothing on the
// socket needs it). Each text message is one JSON-RPC message either way;
// binary messages are ignored. Unlike the SDK server, the first message need
// not be initialize: the engine answers whatever comes, as it does on stdio.
//
// # Security and limits
//
// Checks run before anything is served, a WebSocket upgrade included (so a
// refused upgrade is an HTTP answer, not a dropped socket): a request with an
// Origin header that is not allowed is 403 (browsers send it; editors and
// the SDK's node clients do not); without the bearer token, when one is set,
// 401 with WWW-Authenticate; a new connection beyond MaxConnections is 503
// with Retry-After. Output the client has not read is bounded per
// connection (MaxBuffered): the engine waits while it is full, and a client
// that reads none of it for StallTimeout loses the connection. An HTTP
// connection without an open stream and without messages for IdleTimeout is
// closed; a WebSocket is pinged and closed when it stops answering.
//
// Load balancers: a connection lives in the one process that accepted it,
// so every request of a connection must reach that process: route by the
// Acp-Connection-Id header (or a cookie the balancer sets on the initialize
// response or the 101). Processes share nothing else but the durable-session
// state dir, through which a new connection to any instance can load a
// session another one recorded.
package remote
