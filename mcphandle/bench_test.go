package mcphandle_test

import (
	"context"
	"testing"

	"github.com/ddbsession/ddbsession"
)

// BenchmarkUse is a use of a handle beside the read it is built on, the
// Authenticate of a ddbsession bearer session of the same user, on the
// test engine, side by side: what the handle adds is its opening,
// the check's synthetic request and the state's decoding.
//
//	go test -run '^$' -bench Use -count 6 ./mcphandle
func BenchmarkUse(b *testing.B) {
	e := newEnv(b)
	m := e.manager()
	req := request("alice", "")
	h := open(b, m, req, 1)
	web, err := ddbsession.New(ddbsession.Config[struct{}]{Client: e.client, Table: e.table, BearerTokens: true})
	if err != nil {
		b.Fatal(err)
	}
	r, err := httpRequest()
	if err != nil {
		b.Fatal(err)
	}
	token, _, err := web.LoginBearer(r, alice, nil, "password")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("handle", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Get(ctx, req, h); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Authenticate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := web.Authenticate(ctx, token); err != nil {
				b.Fatal(err)
			}
		}
	})
}
