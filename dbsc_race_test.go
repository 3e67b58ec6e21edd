package ddbsession_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ddbsession/ddbsession"
)

// Device binding's races, made deterministic: the probe pauses one side
// just before a write reaches the engine and runs the other side to the
// end there, so that the paused write meets the table the other left.

// pauseBefore runs other, once, when the first UpdateItem of an item whose
// partition key starts with prefix is about to reach the engine.
func pauseBefore(p *probe, prefix string, other func()) *atomic.Bool {
	var fired atomic.Bool
	p.before = func(_ context.Context, op string, in any) {
		if op == "UpdateItem" && strings.HasPrefix(updateKey(in), prefix) && fired.CompareAndSwap(false, true) {
			other()
		}
	}
	return &fired
}

// boundValues returns the values of the bound cookies that responses set.
func boundValues(ws ...*httptest.ResponseRecorder) []string {
	var values []string
	for _, w := range ws {
		for _, c := range boundSetCookies(w) {
			if c.Value != "" {
				values = append(values, c.Value)
			}
		}
	}
	return values
}

// TestDeviceRefreshesRacingOneChallenge: two refreshes answer the same
// challenge (Chromium re-sends a cached proof; a thief may replay one).
// The second reads the session after the first read it and writes first;
// the first's write then finds the challenge used: exactly one bound
// cookie is issued, and it is the one the table holds.
func TestDeviceRefreshesRacingOneChallenge(t *testing.T) {
	t.Parallel()
	eachAlg(t, func(t *testing.T, alg string) {
		e, p := newBoundEnv(t)
		b := e.bound(devicesOf(alg)[0], e.putUser("alice"))
		jwt := b.device.Refresh(b.challenge)
		var inner *httptest.ResponseRecorder
		fired := pauseBefore(p, "SESSION#", func() { inner = b.refreshWith(jwt) })
		outer := b.refreshWith(jwt)
		p.before = nil
		if !fired.Load() {
			t.Fatal("the race did not run")
		}
		issued := boundValues(outer, inner)
		if len(issued) != 1 {
			t.Fatalf("%d bound cookies issued (statuses %d and %d), want exactly 1", len(issued), outer.Code, inner.Code)
		}
		if inner.Code != http.StatusOK || outer.Code != http.StatusForbidden {
			t.Errorf("statuses: %d for the refresh that wrote first, %d for the other; want 200 and 403", inner.Code, outer.Code)
		}
		challengeOf(t, outer, b.id)
		if got := attrText(e.itemOf(kindSession, b.id)["boundCookie"]); got != "S:"+tokenHash(issued[0]) {
			t.Errorf("stored bound cookie %s is not the issued one's digest", got)
		}
		if got := e.statusWith(b.session, &http.Cookie{Name: "__Host-bound", Value: issued[0]}); got != http.StatusOK {
			t.Errorf("the issued bound cookie: status %d", got)
		}
	})
}

// TestDeviceRegistrationRacingEnd: a registration whose session is signed
// out or revoked between its read and its writes, either before the
// session item is bound or between that and the index item, leaves neither
// item behind: nothing to list, nothing to let in.
func TestDeviceRegistrationRacingEnd(t *testing.T) {
	t.Parallel()
	for _, alg := range algs {
		for _, point := range []struct{ name, prefix string }{
			{"before the session item is bound", "SESSION#"},
			{"before the index item is marked", "USERSESSIONS#"},
		} {
			for _, end := range sessionEnders[:2] { // Logout and Revoke delete; RevokeAll is below
				t.Run(alg+"/"+end.name+" "+point.name, func(t *testing.T) {
					t.Parallel()
					e, p := newBoundEnv(t)
					alice := e.putUser("alice")
					b, offer := e.loginOffered(devicesOf(alg)[0], alice)
					id := e.mustList(alice)[0].ID
					fired := pauseBefore(p, point.prefix, func() { end.run(t, e, alice, b, id) })
					w := b.registerWith(b.device.Registration(offer.Challenge))
					p.before = nil
					if !fired.Load() {
						t.Fatal("the race did not run")
					}
					if items := itemsWithSID(e.scanAll(), id); len(items) != 0 {
						t.Errorf("registration (status %d) racing %s left items: %v", w.Code, end.name, itemsText(items))
					}
					if list := e.mustList(alice); len(list) != 0 {
						t.Errorf("List: %+v", list)
					}
					for _, v := range boundValues(w) {
						if got := e.statusWith(b.session, &http.Cookie{Name: "__Host-bound", Value: v}); got != http.StatusUnauthorized {
							t.Errorf("the bound cookie of the ended session: status %d", got)
						}
					}
					if got := b.status(); got != http.StatusUnauthorized {
						t.Errorf("the session cookie: status %d", got)
					}
				})
			}
		}
	}
}

// TestDeviceRegistrationsRacing: two registrations of one session with
// different keys (the device and a thief with copies of the session cookie
// and the offer), the second landing between the first's read and write.
// One wins, and the key stored is the winner's: the other refreshes with
// nothing.
func TestDeviceRegistrationsRacing(t *testing.T) {
	t.Parallel()
	for _, alg := range algs {
		for _, otherKey := range []string{alg, otherAlg(alg)} {
			t.Run(alg+"/against "+otherKey, func(t *testing.T) {
				t.Parallel()
				e, p := newBoundEnv(t)
				first, offer := e.loginOffered(devicesOf(alg)[0], e.putUser("alice"))
				second := *first
				second.device = devicesOf(otherKey)[1]
				var inner *httptest.ResponseRecorder
				fired := pauseBefore(p, "SESSION#", func() { inner = second.registerWith(second.device.Registration(offer.Challenge)) })
				outer := first.registerWith(first.device.Registration(offer.Challenge))
				p.before = nil
				if !fired.Load() {
					t.Fatal("the race did not run")
				}
				if issued := boundValues(outer, inner); len(issued) != 1 {
					t.Fatalf("%d bound cookies issued (statuses %d, %d), want 1", len(issued), outer.Code, inner.Code)
				}
				if inner.Code != http.StatusOK || outer.Code != http.StatusBadRequest {
					t.Fatalf("statuses %d (wrote first) and %d, want 200 and 400", inner.Code, outer.Code)
				}
				second.take(inner)
				if key := e.storedKey(second.id); !maps.Equal(key, second.device.JWK()) {
					t.Errorf("stored key %v, want the winner's %v", key, second.device.JWK())
				}
				loser := second
				loser.device = first.device
				if w := loser.chromiumRefresh(); w.Code != http.StatusBadRequest || len(boundValues(w)) != 0 {
					t.Errorf("refresh with the losing key: status %d, cookies %v; want 400, none", w.Code, w.Result().Cookies())
				}
				second.refresh()
				if got := second.status(); got != http.StatusOK {
					t.Errorf("the winner after its refresh: status %d", got)
				}
			})
		}
	}
}

// TestDeviceRefreshRacingEnd: a refresh whose session is ended between its
// read and its write. After RevokeAll, whatever bound cookie the refresh
// issues does not let the session in: the user's cutoff still applies. After
// Logout or Revoke the write finds no session, creates no item, and the
// browser is told to end the binding.
func TestDeviceRefreshRacingEnd(t *testing.T) {
	t.Parallel()
	for _, alg := range algs {
		for _, end := range sessionEnders {
			t.Run(alg+"/"+end.name, func(t *testing.T) {
				t.Parallel()
				e, p := newBoundEnv(t)
				alice := e.putUser("alice")
				b := e.bound(devicesOf(alg)[0], alice)
				fired := pauseBefore(p, "SESSION#", func() { end.run(t, e, alice, b, b.id) })
				w := b.refreshWith(b.device.Refresh(b.challenge))
				p.before = nil
				if !fired.Load() {
					t.Fatal("the race did not run")
				}
				for _, v := range boundValues(w) {
					if got := e.statusWith(b.session, &http.Cookie{Name: "__Host-bound", Value: v}); got != http.StatusUnauthorized {
						t.Errorf("the bound cookie the racing refresh issued: status %d, want 401", got)
					}
				}
				if got := b.status(); got != http.StatusUnauthorized {
					t.Errorf("the earlier bound cookie: status %d, want 401", got)
				}
				if _, _, err := e.m.Check(context.Background(), b.session.Value); !errors.Is(err, ddbsession.ErrNoSession) {
					t.Errorf("Check: %v, want ErrNoSession", err)
				}
				if end.name == "RevokeAll" && len(boundValues(w)) == 0 {
					// Refusing the refresh is as good as issuing a cookie
					// that does not get in (checked above).
					assertEnded(t, w, b.id, "refresh racing RevokeAll")
				} else if end.name != "RevokeAll" {
					assertEnded(t, w, b.id, "refresh racing "+end.name)
					if items := itemsWithSID(e.scanAll(), b.id); len(items) != 0 {
						t.Errorf("refresh racing %s left items: %v", end.name, itemsText(items))
					}
				}
				assertEnded(t, b.chromiumRefresh(), b.id, "the next refresh")
				if list := e.mustList(alice); len(list) != 0 {
					t.Errorf("List: %+v", list)
				}
			})
		}
	}
}

// storedKey returns the device key that session id's item holds, a JWK.
func (e *env) storedKey(id string) map[string]string {
	e.t.Helper()
	item := e.itemOf(kindSession, id)
	var key map[string]string
	if err := json.Unmarshal([]byte(strings.TrimPrefix(attrText(item["boundKey"]), "S:")), &key); err != nil {
		e.t.Fatalf("boundKey of %s: %v", itemText(item), err)
	}
	return key
}
