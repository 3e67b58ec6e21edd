package mcpsession_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbstream"
	"github.com/ddbsession/ddbsession/mcpsession"
)

// Two instances of one MCP server on one table: a session initialized on
// the first is served by the second, and a DELETE on the second ends it on
// the first.
func Example() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx) // honours AWS_ENDPOINT_URL_DYNAMODB
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(awsCfg)
	table := "example-" + strings.ToLower(rand.Text()[:8])
	defer client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &table})

	// instance is what each process of the server runs.
	instance := func() (*mcpsession.Manager, *httptest.Server) {
		sessions, err := mcpsession.New(mcpsession.Config{
			Sessions: ddbsession.Config[struct{}]{
				Client: client, Table: table, Limits: ddbsession.Limits{IdleTimeout: time.Hour},
				Logger: slog.New(slog.DiscardHandler), // dynalite has no TTL, which CreateTable says
			},
			Name: "notes",
		})
		if err != nil {
			log.Fatal(err)
		}
		hooks := &server.Hooks{}
		sessions.AddHooks(hooks)
		mcpServer := server.NewMCPServer("notes", "1.0.0", server.WithHooks(hooks))
		mcpServer.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			c := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo).GetClientInfo()
			return mcp.NewToolResultText(c.Name + " " + c.Version + " on " + server.RequestProtocolVersion(ctx)), nil
		})
		streamable := sessions.NewTransport(mcpServer,
			server.WithStreamableHTTPProtocolVersions(mcp.LegacyProtocolVersions()...),
		)
		return sessions, httptest.NewServer(sessions.Handler(streamable))
	}
	sessions, one := instance()
	defer one.Close()
	if err := sessions.Sessions().CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
	_, two := instance()
	defer two.Close()

	// mcp-go's client initializes on instance 1...
	first, id := connect(one.URL+"/mcp", "")
	defer first.Close()
	var init mcp.InitializeRequest
	init.Params.ClientInfo = mcp.Implementation{Name: "tester", Version: "2.0"}
	if _, err := first.Initialize(ctx, init); err != nil {
		log.Fatal(err)
	}
	// ...and a client with the same session ID calls a tool on instance 2.
	second, _ := connect(two.URL+"/mcp", id())
	fmt.Println("instance 2:", whoamiText(second))
	second.Close() // DELETE on instance 2

	var call mcp.CallToolRequest
	call.Params.Name = "whoami"
	_, err = first.CallTool(ctx, call)
	fmt.Println("instance 1 after the DELETE:", errors.Is(err, transport.ErrSessionTerminated))
	// Output:
	// instance 2: tester 2.0 on 2025-11-25
	// instance 1 after the DELETE: true
}

// connect returns mcp-go's client of url, on the protocol versions that have
// sessions, with the session ID if not "", and a function that returns its
// session ID.
func connect(url, id string) (*client.Client, func() string) {
	trans, err := transport.NewStreamableHTTP(url, transport.WithSession(id))
	if err != nil {
		log.Fatal(err)
	}
	var opts []client.ClientOption
	if id != "" {
		opts = append(opts, client.WithSession())
	}
	c := client.NewClient(trans, append(opts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))...)
	if err := c.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	return c, trans.GetSessionId
}

func whoamiText(c *client.Client) string {
	var call mcp.CallToolRequest
	call.Params.Name = "whoami"
	res, err := c.CallTool(context.Background(), call)
	if err != nil {
		log.Fatal(err)
	}
	return mcp.GetTextFromContent(res.Content[0])
}

// A Lambda function on the table's stream learns which client each MCP
// session that TTL deleted was of.
func Example_streamCleanup() {
	h, err := ddbstream.New(ddbstream.Config{
		Cleanup: func(ctx context.Context, s ddbsession.Session) error {
			if st, ok := mcpsession.StateOf(s); ok {
				slog.InfoContext(ctx, "MCP session expired", "sid", s.ID, "client", st.ClientInfo.Name, "version", st.ClientInfo.Version)
			}
			return nil // must be idempotent: records come at least once
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(h.Handle)
}
