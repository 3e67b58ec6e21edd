package ddbsession_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession"
)

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	client := newProbe(nil)
	cases := []struct {
		name   string
		mutate func(*ddbsession.Config[User])
		want   string // in the error
	}{
		{"no client", func(c *ddbsession.Config[User]) { c.Client = nil }, "Config.Client"},
		{"no table", func(c *ddbsession.Config[User]) { c.Table = "" }, "Config.Table"},
		{"cookie name with space", func(c *ddbsession.Config[User]) { c.CookieName = "my session" }, "Config.CookieName"},
		{"idle below a second", func(c *ddbsession.Config[User]) { c.IdleTimeout = time.Millisecond }, "Config.IdleTimeout"},
		{"refresh not shorter than idle", func(c *ddbsession.Config[User]) {
			c.IdleTimeout = time.Hour
			c.RefreshInterval = time.Hour
		}, "Config.RefreshInterval"},
		{"negative refresh", func(c *ddbsession.Config[User]) { c.RefreshInterval = -time.Second }, "Config.RefreshInterval"},
		{"negative absolute", func(c *ddbsession.Config[User]) { c.AbsoluteLifetime = -time.Hour }, "Config.AbsoluteLifetime"},
		{"negative store timeout", func(c *ddbsession.Config[User]) { c.StoreTimeout = -time.Second }, "Config.StoreTimeout"},
		{"sort key on hash-only", func(c *ddbsession.Config[User]) {
			c.Layout.HashOnly = true
			c.Layout.SortKey = "sk"
		}, "Config.Layout.SortKey"},
		{"same key names", func(c *ddbsession.Config[User]) { c.Layout.SortKey = "pk" }, "Config.Layout.PartitionKey"},
		{"TTL attribute is a key", func(c *ddbsession.Config[User]) { c.Layout.TTLAttribute = "pk" }, `"pk"`},
		{"TTL attribute clashes", func(c *ddbsession.Config[User]) { c.Layout.TTLAttribute = "createdAt" }, `"createdAt"`},
		{"same prefixes", func(c *ddbsession.Config[User]) { c.Layout.UserSessionsPrefix = "SESSION#" }, "Config.Layout.SessionPrefix"},
		{"sort key is a session attribute", func(c *ddbsession.Config[User]) { c.Layout.SortKey = "kind" }, `"kind"`},
		{"partition key is a session attribute", func(c *ddbsession.Config[User]) { c.Layout.PartitionKey = "sid" }, `"sid"`},
		{"too many shards", func(c *ddbsession.Config[User]) { c.Layout.ExpiryIndexShards = 1000 }, "Config.Layout.ExpiryIndexShards"},
		{"unknown Clear-Site-Data directive", func(c *ddbsession.Config[User]) { c.ClearSiteData = []string{"cookies", "everything"} }, `Config.ClearSiteData "everything"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ddbsession.Config[User]{Client: client, Table: "t"}
			tc.mutate(&cfg)
			_, err := ddbsession.New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New error = %v, want one naming %s", err, tc.want)
			}
		})
	}
	if _, err := ddbsession.New(ddbsession.Config[User]{Client: client, Table: "t"}); err != nil {
		t.Errorf("New with only Client and Table: %v", err)
	}
}
