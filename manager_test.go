package ddbsession_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	client := ddbtest.NewProbe(nil)
	cases := []struct {
		name   string
		mutate func(*ddbsession.Config[User])
		want   string // in the error
	}{
		{"no client", func(c *ddbsession.Config[User]) { c.Client = nil }, "Config.Client"},
		{"no table", func(c *ddbsession.Config[User]) { c.Table = "" }, "Config.Table"},
		{"cookie name with space", func(c *ddbsession.Config[User]) { c.Cookie.Name = "my session" }, "Config.Cookie.Name"},
		{"idle below a second", func(c *ddbsession.Config[User]) { c.Limits.IdleTimeout = time.Millisecond }, "Config.Limits.IdleTimeout"},
		{"refresh not shorter than idle", func(c *ddbsession.Config[User]) {
			c.Limits.IdleTimeout = time.Hour
			c.Limits.RefreshInterval = time.Hour
		}, "Config.Limits.RefreshInterval"},
		{"negative refresh", func(c *ddbsession.Config[User]) { c.Limits.RefreshInterval = -time.Second }, "Config.Limits.RefreshInterval"},
		{"negative absolute", func(c *ddbsession.Config[User]) { c.Limits.AbsoluteLifetime = -time.Hour }, "Config.Limits.AbsoluteLifetime"},
		{"negative store timeout", func(c *ddbsession.Config[User]) { c.Limits.StoreTimeout = -time.Second }, "Config.Limits.StoreTimeout"},
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
		{"unknown Clear-Site-Data directive", func(c *ddbsession.Config[User]) { c.Cookie.ClearSiteData = []string{"cookies", "everything"} }, `Config.Cookie.ClearSiteData "everything"`},
		{"idle longer than the absolute lifetime", func(c *ddbsession.Config[User]) {
			c.Limits.IdleTimeout, c.Limits.AbsoluteLifetime = 2*time.Hour, time.Hour
		}, "Config.Limits.IdleTimeout 2h0m0s is longer than AbsoluteLifetime 1h0m0s, which ends every session first"},
		{"unknown AAL", func(c *ddbsession.Config[User]) { c.Limits.AAL = 4 }, "Config.Limits.AAL 4: must be 1, 2 or 3"},
		{"AAL1 beyond 30 days", func(c *ddbsession.Config[User]) { c.Limits.AAL, c.Limits.AbsoluteLifetime = 1, 31*24*time.Hour }, "AAL1 allows at most 720h0m0s"},
		{"AAL2 idle beyond an hour", func(c *ddbsession.Config[User]) { c.Limits.AAL, c.Limits.IdleTimeout = 2, 2*time.Hour }, "Config.Limits.IdleTimeout 2h0m0s: AAL2 allows at most 1h0m0s"},
		{"AAL2 beyond a day", func(c *ddbsession.Config[User]) { c.Limits.AAL, c.Limits.AbsoluteLifetime = 2, 25*time.Hour }, "AAL2 allows at most 24h0m0s"},
		{"AAL3 idle beyond 15 minutes", func(c *ddbsession.Config[User]) { c.Limits.AAL, c.Limits.IdleTimeout = 3, 16*time.Minute }, "AAL3 allows at most 15m0s"},
		{"AAL3 beyond 12 hours", func(c *ddbsession.Config[User]) { c.Limits.AAL, c.Limits.AbsoluteLifetime = 3, 13*time.Hour }, "AAL3 allows at most 12h0m0s"},
		{"negative MaxSessions", func(c *ddbsession.Config[User]) { c.Limits.MaxSessions = -1 }, "Config.Limits.MaxSessions -1"},
		{"MaxSessions beyond 100", func(c *ddbsession.Config[User]) { c.Limits.MaxSessions = 101 }, "Config.Limits.MaxSessions 101"},
		{"MaxSessions on a hash-only table", func(c *ddbsession.Config[User]) { c.Limits.MaxSessions, c.Layout.HashOnly = 2, true }, "Config.Limits.MaxSessions needs a table with a sort key"},
		{"RefuseAtMaxSessions alone", func(c *ddbsession.Config[User]) { c.Limits.RefuseAtMaxSessions = true }, "Config.Limits.RefuseAtMaxSessions is set without a MaxSessions"},
		{"pending login too short", func(c *ddbsession.Config[User]) { c.Limits.PendingLifetime = time.Second }, "Config.Limits.PendingLifetime 1s"},
		{"pending login too long", func(c *ddbsession.Config[User]) { c.Limits.PendingLifetime = 2 * time.Hour }, "Config.Limits.PendingLifetime 2h0m0s"},
		{"HideUserKey with LoadUser", func(c *ddbsession.Config[User]) {
			c.Cookie.HideUserKey = true
			c.LoadUser = func(context.Context, ddbsession.UserKey) (User, int64, error) { return User{}, 0, nil }
		}, "Config.Cookie.HideUserKey is set with a LoadUser"},
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
	// Of several invalid fields, the first in the Config's order is named,
	// every time.
	bad := ddbsession.Config[User]{Client: client, Table: "t",
		Cookie: ddbsession.Cookie{Name: "my session"}, Limits: ddbsession.Limits{AAL: 4},
		DeviceBinding: ddbsession.DeviceBinding{CookieLifetime: time.Second}}
	for range 20 {
		if _, err := ddbsession.New(bad); err == nil || !strings.Contains(err.Error(), "Config.Cookie.Name") {
			t.Fatalf("New with three invalid fields = %v, want the first, Config.Cookie.Name", err)
		}
	}
}

// An assurance level fills in its bounds as defaults, and a shorter
// absolute lifetime the idle timeout's: the cookie of a new session says
// which.
func TestLifetimeDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(*ddbsession.Config[User])
		maxAge int // of a new session's cookie: the idle timeout
	}{
		{"no preset", nil, 24 * 3600},
		{"AAL1", func(c *ddbsession.Config[User]) { c.Limits.AAL = 1 }, 24 * 3600},
		{"AAL2", func(c *ddbsession.Config[User]) { c.Limits.AAL = 2 }, 3600},
		{"AAL3", func(c *ddbsession.Config[User]) { c.Limits.AAL = 3 }, 15 * 60},
		{"absolute lifetime shorter than a day", func(c *ddbsession.Config[User]) { c.Limits.AbsoluteLifetime = 3 * time.Hour }, 3 * 3600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *ddbsession.Config[User]) {
				c.Limits.IdleTimeout, c.Limits.RefreshInterval = 0, 0 // the defaults, not the env's
				if tc.mutate != nil {
					tc.mutate(c)
				}
			})
			if c := e.login(e.putUser("alice")); c.MaxAge != tc.maxAge {
				t.Errorf("Max-Age %d, want %d", c.MaxAge, tc.maxAge)
			}
		})
	}
}
