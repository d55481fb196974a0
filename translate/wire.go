package translate

import (
	"encoding/json"

	"github.com/acp-bridge/acp-bridge/internal/wire"
)

// The JSON-RPC envelope, its errors and frames are package wire's, below
// both the engine and the transports; these names keep them where every
// translator has always found them.

// Envelope is the routing view of one JSON-RPC message: see wire.Envelope.
type Envelope = wire.Envelope

// Error is a JSON-RPC error that keeps its code: see wire.Error.
type Error = wire.Error

// Parser is ParseEnvelopeInto for one stream of messages: see wire.Parser.
type Parser = wire.Parser

// Standard JSON-RPC and ACP error codes (schema: ErrorCode).
const (
	CodeParseError       = wire.CodeParseError
	CodeInvalidRequest   = wire.CodeInvalidRequest
	CodeMethodNotFound   = wire.CodeMethodNotFound
	CodeInvalidParams    = wire.CodeInvalidParams
	CodeInternalError    = wire.CodeInternalError
	CodeRequestCancelled = wire.CodeRequestCancelled
	CodeAuthRequired     = wire.CodeAuthRequired
	CodeResourceNotFound = wire.CodeResourceNotFound
)

// MaxDepth is how deeply arrays and objects may nest in a message.
const MaxDepth = wire.MaxDepth

// Sentinels for errors.Is.
var (
	ErrParse          = wire.ErrParse
	ErrInvalidRequest = wire.ErrInvalidRequest
	ErrMethodNotFound = wire.ErrMethodNotFound
	ErrInvalidParams  = wire.ErrInvalidParams
	ErrInternal       = wire.ErrInternal
)

// Errorf is wire.Errorf.
func Errorf(code int, format string, args ...any) *Error {
	return wire.Errorf(code, format, args...)
}

// ParseEnvelope is wire.ParseEnvelope.
func ParseEnvelope(frame []byte) (Envelope, *Error) { return wire.ParseEnvelope(frame) }

// ParseEnvelopeInto is wire.ParseEnvelopeInto.
func ParseEnvelopeInto(env *Envelope, frame []byte) *Error {
	return wire.ParseEnvelopeInto(env, frame)
}

// Valid is wire.Valid.
func Valid(b []byte) error { return wire.Valid(b) }

// RequestFrame is wire.RequestFrame.
func RequestFrame(id json.RawMessage, method string, params json.RawMessage) []byte {
	return wire.RequestFrame(id, method, params)
}

// NotificationFrame is wire.NotificationFrame.
func NotificationFrame(method string, params json.RawMessage) []byte {
	return wire.NotificationFrame(method, params)
}

// ResultFrame is wire.ResultFrame.
func ResultFrame(id, result json.RawMessage) []byte { return wire.ResultFrame(id, result) }

// ErrorFrame is wire.ErrorFrame.
func ErrorFrame(id, errObj json.RawMessage) []byte { return wire.ErrorFrame(id, errObj) }

// IntID is wire.IntID.
func IntID(n uint64) json.RawMessage { return wire.IntID(n) }
