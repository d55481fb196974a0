package check

import "github.com/acp-bridge/acp-bridge/translate/acpschema"

// Schema validates ACP messages against the embedded ACP v1 JSON Schema
// (translate/acpschema, shared with the compliance shim).
type Schema = acpschema.Schema

// LoadSchema returns the embedded schema, compiled once.
func LoadSchema() (*Schema, error) { return acpschema.LoadSchema() }
