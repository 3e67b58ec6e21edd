package scsstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/scsstore"
)

// New names the field that is wrong, once, before any request.
func TestNewValidates(t *testing.T) {
	t.Parallel()
	client := &dynamodb.Client{}
	core, err := ddbsession.New(ddbsession.Config[struct{}]{Client: client, Table: "app", Layout: ddbsession.Layout{TTLAttribute: "ttl"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  scsstore.Config
		want string // in the error; "" for a valid Config
	}{
		{"defaults", scsstore.Config{Client: client, Table: "app"}, ""},
		{"hash-only", scsstore.Config{Client: client, Table: "app", Layout: ddbsession.Layout{HashOnly: true}}, ""},
		{"no client", scsstore.Config{Table: "app"}, "Config.Client"},
		{"the Manager's table", scsstore.Config{Sessions: core.Table()}, ""},
		{"the Manager's, and its table and layout", scsstore.Config{Sessions: core.Table(), Table: "app", Layout: ddbsession.Layout{TTLAttribute: "ttl"}}, ""},
		{"another table than the Manager's", scsstore.Config{Sessions: core.Table(), Table: "other"}, `Config.Table "other" is not the Manager's "app"`},
		{"another layout than the Manager's", scsstore.Config{Sessions: core.Table(), Layout: ddbsession.Layout{TTLAttribute: "expiresAt"}}, "Config.Layout {"},
		{"no table", scsstore.Config{Client: client}, "Config.Table"},
		{"sort key and hash-only", scsstore.Config{Client: client, Table: "app", Layout: ddbsession.Layout{SortKey: "sk", HashOnly: true}}, "Config.Layout.SortKey"},
		{"same keys", scsstore.Config{Client: client, Table: "app", Layout: ddbsession.Layout{PartitionKey: "k", SortKey: "k"}}, "Config.Layout.PartitionKey"},
		{"key named data", scsstore.Config{Client: client, Table: "app", Layout: ddbsession.Layout{SortKey: "data"}}, `"data"`},
		{"TTL named kind", scsstore.Config{Client: client, Table: "app", Layout: ddbsession.Layout{TTLAttribute: "kind"}}, `"kind"`},
		{"TTL on a key", scsstore.Config{Client: client, Table: "app", Layout: ddbsession.Layout{TTLAttribute: "pk"}}, `"pk"`},
		{"core's prefix", scsstore.Config{Client: client, Table: "app", Prefix: "SESSION#"}, "Config.Prefix"},
		{"interval below a second", scsstore.Config{Client: client, Table: "app", MinCommitInterval: time.Millisecond}, "Config.MinCommitInterval"},
		{"negative interval", scsstore.Config{Client: client, Table: "app", MinCommitInterval: -time.Minute}, "Config.MinCommitInterval"},
		{"negative record bytes", scsstore.Config{Client: client, Table: "app", RecordBytes: -1}, "Config.RecordBytes"},
		{"revoke everyone within a second", scsstore.Config{Client: client, Table: "app", RevokeEveryoneWithin: time.Second}, ""},
		{"revoke everyone within less", scsstore.Config{Client: client, Table: "app", RevokeEveryoneWithin: time.Millisecond}, "Config.RevokeEveryoneWithin"},
		{"negative revoke everyone", scsstore.Config{Client: client, Table: "app", RevokeEveryoneWithin: -time.Second}, "Config.RevokeEveryoneWithin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scsstore.New(tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("New: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("New: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
