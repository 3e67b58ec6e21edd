package ddbsession_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/dbsc/dbsctest"
)

// These tests come from an adversarial review of device binding: each
// failed before the fix it names.

// retryAfterLoss applies an UpdateItem whose expression contains sets,
// loses its answer, and sends it again, as the SDK's retryer does after a
// 500 or a connection reset: the caller sees the retry's answer,
// ConditionalCheckFailed, since its own write landed already.
type retryAfterLoss struct {
	ddbsession.Client
	mu   sync.Mutex
	sets string
	hits int
}

func (l *retryAfterLoss) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := l.Client.UpdateItem(ctx, in, o...)
	l.mu.Lock()
	hit := err == nil && l.sets != "" && strings.Contains(*in.UpdateExpression, l.sets)
	if hit {
		l.hits++
		l.sets = ""
	}
	l.mu.Unlock()
	if hit {
		return l.Client.UpdateItem(ctx, in, o...)
	}
	return out, err
}

// A registration or refresh whose write landed, and whose retry then met
// its own spent condition, still answers with the bound cookie: Chromium
// does not retry a registration, and a refused one would leave the
// session bound to a key whose browser gave up.
func TestDeviceBindingWriteRetriedAfterItLanded(t *testing.T) {
	t.Parallel()
	lose := &retryAfterLoss{}
	e := newEnv(t, withDeviceBinding(10*time.Minute), func(c *ddbsession.Config[User]) {
		lose.Client = c.Client
		c.Client = lose
	})
	alice := e.putUser("alice")
	b, offer := e.loginOffered(dbsctest.NewES256(), alice)
	lose.sets = "#key = :key" // bind's write
	b.register(offer)
	if got := b.status(); got != http.StatusOK || lose.hits != 1 {
		t.Fatalf("after a registration retried once it landed: status %d, %d retries", got, lose.hits)
	}
	if list := e.mustList(alice); len(list) != 1 || !list[0].DeviceBound {
		t.Fatalf("List: %+v", list)
	}

	lose.sets = "#prev = :prev" // rebind's write
	e.clock.Advance(9 * time.Minute)
	w := b.refreshWith(b.device.Refresh(b.challenge))
	if w.Code != http.StatusOK || lose.hits != 2 {
		t.Fatalf("a refresh retried once it landed: status %d, %d retries; want 200 (a 403 costs the browser a signature)", w.Code, lose.hits)
	}
	b.take(w)
	if got := b.status(); got != http.StatusOK {
		t.Fatalf("after the refresh: status %d", got)
	}
}

// A thief with the session cookie and the session ID, but neither the
// bound cookie nor the key, cannot make the device's challenge stale:
// Chromium gives a session up after 5 challenges in a row.
func TestDeviceChallengeNotRotatedByCopies(t *testing.T) {
	t.Parallel()
	e, _ := newBoundEnv(t)
	b := e.bound(devicesOf("ES256")[0], e.putUser("alice"))
	thief := &boundBrowser{e: e, session: b.session, id: b.id}
	e.clock.Advance(9 * time.Minute)
	for range 5 {
		w := thief.refreshWith("")
		if w.Code != http.StatusForbidden {
			t.Fatalf("thief: status %d, want 403", w.Code)
		}
		if got := challengeOf(t, w, b.id); got != b.challenge {
			t.Fatalf("the thief's 403 carried %q, not the challenge the device holds", got)
		}
	}
	b.take(b.refreshWith(b.device.Refresh(b.challenge)))
	if got := b.status(); got != http.StatusOK {
		t.Fatalf("the device after the thief's tries: status %d", got)
	}
}

// The challenge of a login's offer travels with the session cookie in the
// login's response; a copy of it (a HAR file) must not bind the session to
// another key once the browser had its chance: it expires in 2 minutes.
func TestRegistrationChallengeIsShortLived(t *testing.T) {
	t.Parallel()
	e, _ := newBoundEnv(t)
	alice := e.putUser("alice")
	victim, offer := e.loginOffered(nil, alice) // a browser without DBSC
	thief := &boundBrowser{e: e, device: devicesOf("ES256")[1], session: victim.session}

	e.clock.Advance(2 * time.Minute)
	w := thief.post(offer.Path, http.Header{"Secure-Session-Response": {thief.device.Registration(offer.Challenge)}})
	if w.Code != http.StatusBadRequest {
		t.Fatalf("registration 2 minutes after login: status %d, want 400", w.Code)
	}
	if got := victim.status(); got != http.StatusOK {
		t.Fatalf("the victim: status %d", got)
	}

	// Within the 2 minutes the browser registers, as Chromium does at once.
	e2, _ := newBoundEnv(t)
	b, offer2 := e2.loginOffered(devicesOf("ES256")[0], e2.putUser("bob"))
	e2.clock.Advance(2*time.Minute - time.Second)
	b.register(offer2)
}

func TestDeviceBindingConfigRefused(t *testing.T) {
	t.Parallel()
	client := &probe{}
	for _, d := range []ddbsession.DeviceBinding{
		{Enabled: true, RegistrationPath: "/dbsc/régister"},
		{Enabled: true, RefreshPath: "/dbsc/refresh\x01"},
		{Enabled: true, RefreshPath: `/dbsc\refresh`},
		{Enabled: true, RefreshPath: "/dbsc/refresh?x=1"},
		{Enabled: true, RefreshPath: "dbsc/refresh"},
		{Enabled: true, RegistrationPath: "/dbsc/x", RefreshPath: "/dbsc/x"},
		{Enabled: true, CookieLifetime: 9 * time.Second},
		{Enabled: true, CookieLifetime: time.Hour + time.Second},
		{Enabled: true, CookieName: "__Host-session"},
	} {
		if _, err := ddbsession.New(ddbsession.Config[User]{Client: client, Table: "t", DeviceBinding: d}); err == nil {
			t.Errorf("New accepted DeviceBinding %+v", d)
		}
	}
	if _, err := ddbsession.New(ddbsession.Config[User]{Client: client, Table: "t", InsecureDevMode: true, DeviceBinding: ddbsession.DeviceBinding{Enabled: true}}); err == nil {
		t.Error("New accepted DeviceBinding with InsecureDevMode")
	}
	if _, err := ddbsession.New(ddbsession.Config[User]{Client: client, Table: "t", DeviceBinding: ddbsession.DeviceBinding{
		Enabled: true, RegistrationPath: "/a-b_c.d~e/r!$&'()*+=:@%20", CookieLifetime: time.Hour,
	}}); err != nil {
		t.Errorf("New refused a valid DeviceBinding: %v", err)
	}
}
