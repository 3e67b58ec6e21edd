package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession"
)

// Lowering AbsoluteLifetime ends older sessions at once, not at their
// stored expiry.
func TestAbsoluteLifetimeCheckedOnRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cookie := e.login(e.putUser("alice"))
	e.clock.Advance(50 * time.Minute)
	stricter := e.cfg
	stricter.IdleTimeout, stricter.AbsoluteLifetime = 30*time.Minute, 45*time.Minute
	m, err := ddbsession.New(stricter)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Check(context.Background(), cookie.Value); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("50-minute-old session under a 45-minute AbsoluteLifetime: %v, want ErrNoSession", err)
	}
	if _, _, err := e.m.Check(context.Background(), cookie.Value); err != nil {
		t.Errorf("the same session under the default lifetime: %v", err)
	}
}

func TestRefreshStopsAtAbsoluteLifetime(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		withProbe(&p)(c)
		c.AbsoluteLifetime = 90 * time.Minute
	})
	cookie := e.login(e.putUser("alice"))
	limit := start.Add(90 * time.Minute).Unix()
	for range 8 { // a request every 11 minutes, up to 88m
		e.clock.Advance(11 * time.Minute)
		if got := e.status(cookie); got != http.StatusOK {
			t.Fatalf("at %v: status %d", e.clock.Now().Sub(start), got)
		}
		if got := itemExpiry(t, e.itemOf(kindSession, "")).Unix(); got > limit {
			t.Fatalf("expiresAt %d is past the absolute limit %d", got, limit)
		}
	}
	if got := itemExpiry(t, e.itemOf(kindSession, "")).Unix(); got != limit {
		t.Errorf("expiresAt = %d, want capped at %d", got, limit)
	}
	// At the cap a due refresh has nothing to move: no write.
	p.reset()
	e.clock.Advance(50 * time.Second)
	e.status(cookie)
	if n := p.count("UpdateItem"); n != 0 {
		t.Errorf("%d writes at the cap, want 0", n)
	}
	e.clock.Advance(70 * time.Second) // 90m0.25s: past created+90m
	if got := e.status(cookie); got != http.StatusUnauthorized {
		t.Errorf("past the absolute lifetime: status %d, want 401", got)
	}
}
