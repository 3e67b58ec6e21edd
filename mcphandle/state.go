package mcphandle

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
)

// State is what a handle holds: what the request that opened it said of
// its client, and the app's own data, of type T. All of it, as JSON, is at
// most [ddbitem.MaxData] bytes (2,048), which keeps a handle's item within
// one read unit; a larger state is refused by Open and Update.
type State[T any] struct {
	// ClientInfo, ProtocolVersion and LogLevel are those of the request
	// that opened the handle (in its _meta, on 2026-07-28). The log level
	// is an mcp.LoggingLevel, which 2026-07-28 deprecates (SEP-2577) and
	// still sends in the deprecation window.
	ClientInfo      *mcp.Implementation `json:"clientInfo,omitempty"`
	ProtocolVersion string              `json:"protocolVersion,omitempty"`
	LogLevel        string              `json:"logLevel,omitempty"`
	// Data is the app's: what a tool that opens a handle gives it, and
	// Update changes.
	Data T `json:"data"`
}

// method is the sign-in method of a handle's session, which tells it from
// the user's other sessions in List and in a stream's records.
const method = "mcphandle"

// wireState is State as the session's data holds it.
type wireState[T any] struct {
	Format int `json:"mcphandle"`
	State[T]
}

// stateFormat is the data's format, which the data names so that no other
// session's data is taken for a handle's.
const stateFormat = 1

// encodeState is s as the session's data: JSON of at most ddbitem.MaxData
// bytes.
func encodeState[T any](s State[T]) (json.RawMessage, error) {
	b, err := json.Marshal(wireState[T]{Format: stateFormat, State: s})
	if err != nil {
		return nil, fmt.Errorf("mcphandle: encode the handle's state: %w", err)
	}
	if len(b) > ddbitem.MaxData {
		return nil, fmt.Errorf("mcphandle: the handle's state is %d bytes of JSON, over ddbitem.MaxData (%d)", len(b), ddbitem.MaxData)
	}
	return b, nil
}

// decodeState reads a session's data as a handle's state, and reports
// false for data that is not one.
func decodeState[T any](data json.RawMessage) (State[T], bool) {
	var w wireState[T]
	if data == nil || json.Unmarshal(data, &w) != nil || w.Format != stateFormat {
		return State[T]{}, false
	}
	return w.State, true
}

// StateOf returns the state of a handle's session, as ddbitem.DecodeSession
// reads it from a stream's record (for ddbstream's clean-up of expired
// handles), and false for a session that is not a handle, or whose data
// is not of type T.
func StateOf[T any](s ddbsession.Session) (State[T], bool) {
	if !slices.Contains(s.Methods, method) {
		return State[T]{}, false
	}
	return decodeState[T](s.Data)
}
