package ddbsessionoidc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessionoidc"
)

// New refuses a Config that cannot work, naming the field, before it
// reaches the provider.
func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		edit func(*ddbsessionoidc.Config[user])
		want string
	}{
		{"no Manager", func(c *ddbsessionoidc.Config[user]) { c.Sessions = nil }, "Config.Sessions"},
		{"no client", func(c *ddbsessionoidc.Config[user]) { c.Client = nil }, "Config.Client"},
		{"no table", func(c *ddbsessionoidc.Config[user]) { c.Table = "" }, "Config.Table"},
		{"hash-only", func(c *ddbsessionoidc.Config[user]) { c.Layout = ddbsession.Layout{HashOnly: true} }, "Config.Layout.HashOnly"},
		{"the core's prefix", func(c *ddbsessionoidc.Config[user]) { c.Prefix = "SESSION#" }, "Config.Prefix"},
		{"plain-HTTP issuer", func(c *ddbsessionoidc.Config[user]) { c.Issuer = "http://idp.example" }, "Config.Issuer"},
		{"no client ID", func(c *ddbsessionoidc.Config[user]) { c.ClientID = "" }, "Config.ClientID"},
		{"relative redirect", func(c *ddbsessionoidc.Config[user]) { c.RedirectURL = "/callback" }, "Config.RedirectURL"},
		{"no mapping", func(c *ddbsessionoidc.Config[user]) { c.User = nil }, "Config.User"},
		{"method with a space", func(c *ddbsessionoidc.Config[user]) { c.Method = "my idp" }, "Config.Method"},
		{"fresh method of 33", func(c *ddbsessionoidc.Config[user]) { c.Method = strings.Repeat("m", 28) }, "Config.FreshMethod"},
		{"fresh method as method", func(c *ddbsessionoidc.Config[user]) { c.FreshMethod = "oidc" }, "Config.FreshMethod"},
		{"attempt of a day", func(c *ddbsessionoidc.Config[user]) { c.AttemptLifetime = 24 * time.Hour }, "Config.AttemptLifetime"},
		{"cookie name", func(c *ddbsessionoidc.Config[user]) { c.CookieName = "a;b" }, "Config.CookieName"},
		{"no provider there", func(c *ddbsessionoidc.Config[user]) { c.Issuer = e.aURL }, "Config.Issuer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := e.config(e.a.sessions, e.a.calls)
			tc.edit(&cfg)
			_, err := ddbsessionoidc.New(context.Background(), cfg)
			if err == nil || !strings.HasPrefix(err.Error(), "ddbsessionoidc: "+tc.want) {
				t.Errorf("New: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
