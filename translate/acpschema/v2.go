package acpschema

import (
	_ "embed"
	"sync"
)

// schemaV2JSON is the stable ACP v2 schema (schema/SOURCE.md says where it
// comes from).
//
//go:embed schema/acp-v2.json
var schemaV2JSON []byte

// v2Defs are the $defs a v2 schema must have.
var v2Defs = []string{"Error", "RequestId", "UpdateSessionNotification", "PromptResponse", "StateUpdate"}

var (
	schemaV2Once sync.Once
	schemaV2Val  *Schema
	schemaV2Err  error
)

// LoadSchemaV2 returns the embedded ACP v2 schema, compiled once. It is used
// as the v1 schema is: RequestDef, NotificationDef and ResultDef name the
// types of what an agent sends a v2 client.
func LoadSchemaV2() (*Schema, error) {
	schemaV2Once.Do(func() { schemaV2Val, schemaV2Err = parseSchema(schemaV2JSON, v2Defs) })
	return schemaV2Val, schemaV2Err
}
