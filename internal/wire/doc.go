// Package wire is the JSON-RPC layer that both the engine (package bridge)
// and the agent-side transports (package legacy) stand on, and the
// translators too: the one-pass scan that checks a message and finds the
// members it is routed by (ParseEnvelope, Valid), JSON-RPC's error objects
// and codes, the frames built around a raw id and raw params, and
// AppendString, the one JSON string encoder of the module.
//
// Its subpackages frame and hold messages: ndjson reads them one per line,
// slab carves small ones from shared blocks and reclaim gives back the
// memory of large ones.
//
// Nothing here does I/O or copies a message it need not: an Envelope's
// fields share the memory of the frame they were read from. The package
// imports nothing else of the module (see layering_test.go at the root).
package wire
