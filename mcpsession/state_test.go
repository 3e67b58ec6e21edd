package mcpsession_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbstream"
	"github.com/ddbsession/ddbsession/mcpsession"
)

// The state in the session's data is what initialize settled and the last
// setLevel asked for, as StateOf reads it back; other data is no state.
func TestStateOf(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.start()
	c, trans := mcpClient(t, &balancer{target: in})
	initialize(t, c)
	//lint:ignore SA1019 logging/setLevel is part of the protocol versions that have sessions.
	if err := c.SetLevel(context.Background(), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelNotice}}); err != nil {
		t.Fatal(err)
	}
	s, _, err := in.sessions.Sessions().Authenticate(context.Background(), trans.GetSessionId())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := mcpsession.StateOf(s)
	want := mcpsession.State{
		ProtocolVersion:    mcp.ProtocolVersion20251125,
		ClientInfo:         mcp.Implementation{Name: "tester", Version: "2.0", Title: "The tests' client"},
		ClientCapabilities: mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}},
		LogLevel:           mcp.LoggingLevelNotice,
	}
	if diff := cmp.Diff(want, got); !ok || diff != "" {
		t.Errorf("StateOf = %v (-want +got):\n%s", ok, diff)
	}
	for _, data := range []string{``, `{"cart":3}`, `{"mcpsession":2,"protocolVersion":"2025-11-25"}`, `{"mcpsession":1}`, `[1]`} {
		if st, ok := mcpsession.StateOf(ddbsession.Session{Data: []byte(data)}); ok {
			t.Errorf("StateOf(data %s) = %+v, true; want false", data, st)
		}
	}
}

// A client's icons never go into the session's data, and the free-form
// parts of what it declares go only while they fit; a client whose
// initialize fits in no way gets no session.
func TestStateThatDoesNotFit(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1500)
	icon := mcp.Icon{Src: "data:image/png;base64," + strings.Repeat("A", 3000)}
	for _, tc := range []struct {
		name   string
		client mcp.Implementation
		caps   mcp.ClientCapabilities
		want   *mcpsession.State // nil: no session
	}{
		{
			name:   "icons",
			client: mcp.Implementation{Name: "tester", Version: "2.0", Description: "a client", Icons: []mcp.Icon{icon}},
			caps:   mcp.ClientCapabilities{Experimental: map[string]any{"small": true}},
			want: &mcpsession.State{
				ClientInfo:         mcp.Implementation{Name: "tester", Version: "2.0", Description: "a client"},
				ClientCapabilities: mcp.ClientCapabilities{Experimental: map[string]any{"small": true}},
			},
		},
		{
			name:   "large free-form parts",
			client: mcp.Implementation{Name: "tester", Version: "2.0", Description: big, WebsiteURL: "https://example.com/"},
			caps:   mcp.ClientCapabilities{Experimental: map[string]any{"big": big}, Sampling: &mcp.SamplingCapability{}},
			want: &mcpsession.State{
				ClientInfo:         mcp.Implementation{Name: "tester", Version: "2.0"},
				ClientCapabilities: mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}},
			},
		},
		{
			name:   "a name beyond any session's data",
			client: mcp.Implementation{Name: strings.Repeat("n", 2100), Version: "2.0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			one, two := e.start(), e.start()
			lb := &balancer{target: one}
			c, trans := mcpClient(t, lb)
			var req mcp.InitializeRequest
			req.Params.ClientInfo, req.Params.Capabilities = tc.client, tc.caps
			_, err := c.Initialize(context.Background(), req)
			if tc.want == nil {
				if !errors.Is(err, transport.ErrSessionTerminated) {
					t.Errorf("initialize: %v, want transport.ErrSessionTerminated", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("initialize: %v", err)
			}
			s, _, err := one.sessions.Sessions().Authenticate(context.Background(), trans.GetSessionId())
			if err != nil {
				t.Fatal(err)
			}
			got, _ := mcpsession.StateOf(s)
			tc.want.ProtocolVersion = mcp.ProtocolVersion20251125
			if diff := cmp.Diff(*tc.want, got); diff != "" {
				t.Errorf("StateOf (-want +got):\n%s", diff)
			}
			lb.to(two)
			if who := callWhoami(t, c); who.Client.Name != "tester" {
				t.Errorf("whoami on instance 2: %+v", who)
			}
		})
	}
}

// TTL's deletion of an MCP session reaches a ddbstream clean-up function
// with the session's state; the server's user item and the index item,
// deleted alike, do not.
func TestStreamCleanupGetsState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.start()
	c, _ := mcpClient(t, &balancer{target: in})
	initialize(t, c)

	var expired []mcpsession.State
	h, err := ddbstream.New(ddbstream.Config{
		Cleanup: func(_ context.Context, s ddbsession.Session) error {
			if st, ok := mcpsession.StateOf(s); ok && s.User.PK == "MCPSERVER#notes" {
				expired = append(expired, st)
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every item in the table, as TTL would delete it.
	items := e.items()
	if len(items) != 3 {
		t.Fatalf("table holds %d items, want 3 (user, session, index)", len(items))
	}
	var ev events.DynamoDBEvent
	for i, it := range items {
		ev.Records = append(ev.Records, events.DynamoDBEventRecord{
			EventName:    "REMOVE",
			UserIdentity: &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"},
			Change:       events.DynamoDBStreamRecord{OldImage: streamImage(t, it), SequenceNumber: string(rune('1' + i)), StreamViewType: "OLD_IMAGE"},
		})
	}
	resp, err := h.Handle(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", resp, err)
	}
	want := []mcpsession.State{{
		ProtocolVersion:    mcp.ProtocolVersion20251125,
		ClientInfo:         mcp.Implementation{Name: "tester", Version: "2.0", Title: "The tests' client"},
		ClientCapabilities: mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}},
	}}
	if diff := cmp.Diff(want, expired); diff != "" {
		t.Errorf("clean-ups (-want +got):\n%s", diff)
	}
}

// streamImage is item as a stream record's image carries it.
func streamImage(t *testing.T, item map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	image := make(map[string]events.DynamoDBAttributeValue, len(item))
	for name, av := range item {
		image[name] = streamValue(t, av)
	}
	return image
}

func streamValue(t *testing.T, av types.AttributeValue) events.DynamoDBAttributeValue {
	t.Helper()
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = streamValue(t, e)
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		return events.NewMapAttribute(streamImage(t, v.Value))
	}
	t.Fatalf("attribute value of a type the tests' items do not hold: %T", av)
	return events.DynamoDBAttributeValue{}
}
