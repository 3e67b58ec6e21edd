package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/mcphandle"
)

// This file is the server of MCP revision 2026-07-28, on the official Go
// SDK, whose state lives in handles (mcphandle): the counter tools, the
// bearer tokens in front, and the routing that sends each request at /mcp
// to the revision it speaks.

// newRevision is the Mcp-Protocol-Version from which requests go to the
// official SDK's server: 2026-07-28, the first revision without sessions.
const newRevision = "2026-07-28"

// byRevision sends the requests of revision 2026-07-28 and later (the
// SDK's client names its revision in the Mcp-Protocol-Version header of
// every request, server/discover included) to current, and the others
// (initialize, which names none, and the requests of a session of
// 2025-11-25 or before) to legacy. The versions are ISO dates, so they
// compare as text.
func byRevision(current, legacy http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= newRevision {
			current.ServeHTTP(w, r)
			return
		}
		legacy.ServeHTTP(w, r)
	})
}

// staticTokens verifies the -token flags' bearer tokens, each standing for
// its subject. A real deployment verifies its authorization server's
// tokens here instead (a JWT's signature and claims, or introspection),
// setting UserID to the subject and Extra["client_id"] to the client.
func staticTokens(tokens map[string]string) auth.TokenVerifier {
	return func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		subject, ok := tokens[token]
		if !ok {
			return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: subject}, nil
	}
}

// parseToken reads a -token flag's "SUBJECT:TOKEN".
func parseToken(s string) (subject, token string, err error) {
	subject, token, ok := strings.Cut(s, ":")
	if !ok || subject == "" || token == "" {
		return "", "", fmt.Errorf("-token %q: want SUBJECT:TOKEN", s)
	}
	return subject, token, nil
}

type openArgs struct{}

type opened struct {
	Handle string `json:"handle"`
}

type addArgs struct {
	Handle string `json:"handle"`
	N      int64  `json:"n"`
}

type getArgs struct {
	Handle string `json:"handle"`
}

type counterValue struct {
	Value int64 `json:"value"`
}

// newCurrent returns the 2026-07-28 server: the counter tools on handles,
// behind the bearer tokens, with the SDK's lines logged through logger
// (which redacts handles).
func newCurrent(handles *mcphandle.Manager[int64], tokens map[string]string, logger *slog.Logger) http.Handler {
	server := sdk.NewServer(&sdk.Implementation{Name: "example", Version: "1.0.0"}, &sdk.ServerOptions{
		Logger:                    logger,
		SupportedProtocolVersions: []string{newRevision},
	})
	sdk.AddTool(server, &sdk.Tool{Name: "counter_open", Description: "Opens a counter at 0, and returns its handle."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ openArgs) (*sdk.CallToolResult, opened, error) {
			h, err := handles.Open(ctx, req, 0)
			return nil, opened{Handle: h}, err
		})
	sdk.AddTool(server, &sdk.Tool{Name: "counter_add", Description: "Adds n to the counter of handle, and returns its value."},
		func(ctx context.Context, req *sdk.CallToolRequest, in addArgs) (*sdk.CallToolResult, counterValue, error) {
			s, err := handles.Update(ctx, req, in.Handle, func(s *mcphandle.State[int64]) error {
				s.Data += in.N
				return nil
			})
			return nil, counterValue{Value: s.Data}, err
		})
	sdk.AddTool(server, &sdk.Tool{Name: "counter_get", Description: "Returns the value of the counter of handle."},
		func(ctx context.Context, req *sdk.CallToolRequest, in getArgs) (*sdk.CallToolResult, counterValue, error) {
			s, err := handles.Get(ctx, req, in.Handle)
			return nil, counterValue{Value: s.Data}, err
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, &sdk.StreamableHTTPOptions{
		Stateless:    true, // every request self-contained: any instance serves it
		JSONResponse: true,
		Logger:       logger,
	})
	// Static tokens carry no expiry; a verifier of real tokens sets it.
	return auth.RequireBearerToken(staticTokens(tokens), &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}

// handleConfig is the handles' ddbsession Config: the table's, and
// -handle-idle.
func handleConfig(cfg appConfig, logger *slog.Logger) mcphandle.Config {
	return mcphandle.Config{
		Sessions: ddbsession.Config[struct{}]{
			Client: cfg.Client,
			Table:  cfg.Table,
			Limits: ddbsession.Limits{IdleTimeout: cfg.HandleIdle},
			Logger: logger,
			Now:    cfg.Now,
		},
		// The example's callers are the -token subjects, whose user items
		// it makes at their first handle; an app's users exist already.
		CreateUsers: true,
	}
}
