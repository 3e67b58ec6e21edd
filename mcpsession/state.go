package mcpsession

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
)

// This file is the session's state as its data holds it: one encoder and
// one decoder, which everything else calls.

// State is what an MCP session's data holds: what the initialize handshake
// settled and mcp-go lets another instance restore, and the log level the
// client last asked for.
type State struct {
	// ProtocolVersion is the version initialize negotiated.
	ProtocolVersion string
	// ClientInfo is the client's name, version and title as initialize
	// sent them. Icons are left out (a data: URI alone can outgrow the
	// item), and so, for an initialize that would not fit otherwise, are
	// Description and WebsiteURL.
	ClientInfo mcp.Implementation
	// ClientCapabilities are the capabilities initialize declared. For an
	// initialize that would not fit otherwise, Extensions and Experimental
	// are left out.
	ClientCapabilities mcp.ClientCapabilities
	// LogLevel is the level of the client's last logging/setLevel; "" if
	// it sent none.
	LogLevel mcp.LoggingLevel
}

// StateOf reads the state out of an MCP session, as
// [ddbsession.Manager.Authenticate] or a ddbstream clean-up function gets
// it. It reports false for a session without one: a web session, or an MCP
// session whose initialize never stored its state, which no instance
// serves.
func StateOf(s ddbsession.Session) (State, bool) {
	return decodeState(s.Data)
}

// stateFormat is the version of the data's format, which the data names
// so that no other data in the table is taken for an MCP session's.
const stateFormat = 1

// wireState is State as the session's data holds it, in JSON.
type wireState struct {
	Format             int                    `json:"mcpsession"`
	ProtocolVersion    string                 `json:"protocolVersion"`
	ClientInfo         mcp.Implementation     `json:"clientInfo"`
	ClientCapabilities mcp.ClientCapabilities `json:"capabilities"`
	LogLevel           mcp.LoggingLevel       `json:"logLevel,omitempty"`
}

// encodeState is s as the session's data: JSON of at most ddbitem.MaxData
// bytes, without what State says is left out.
func encodeState(s State) (json.RawMessage, error) {
	w := wireState{
		Format:             stateFormat,
		ProtocolVersion:    s.ProtocolVersion,
		ClientInfo:         s.ClientInfo,
		ClientCapabilities: s.ClientCapabilities,
		LogLevel:           s.LogLevel,
	}
	w.ClientInfo.Icons = nil
	raw, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("mcpsession: encode the session's state: %w", err)
	}
	if len(raw) <= ddbitem.MaxData {
		return raw, nil
	}
	// The free-form parts go first; what is left is what a client names
	// and declares in the specification's own fields.
	w.ClientCapabilities.Extensions, w.ClientCapabilities.Experimental = nil, nil
	w.ClientInfo.Description, w.ClientInfo.WebsiteURL = "", ""
	if raw, err = json.Marshal(w); err != nil {
		return nil, fmt.Errorf("mcpsession: encode the session's state: %w", err)
	}
	if len(raw) > ddbitem.MaxData {
		return nil, fmt.Errorf("mcpsession: the session's state is %d bytes of JSON without its free-form parts, more than the %d a session's data holds", len(raw), ddbitem.MaxData)
	}
	return raw, nil
}

// errNoState is for data that is not an MCP session's state.
var errNoState = errors.New("mcpsession: the session holds no MCP state")

// decodeState reads data that encodeState wrote; false for anything else.
func decodeState(data json.RawMessage) (State, bool) {
	var w wireState
	if len(data) == 0 || json.Unmarshal(data, &w) != nil || w.Format != stateFormat || w.ProtocolVersion == "" {
		return State{}, false
	}
	return State{
		ProtocolVersion:    w.ProtocolVersion,
		ClientInfo:         w.ClientInfo,
		ClientCapabilities: w.ClientCapabilities,
		LogLevel:           w.LogLevel,
	}, true
}
