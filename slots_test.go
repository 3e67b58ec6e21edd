package ddbsession_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/internal/item"
)

// The session limit's voids under lost answers and late writes; its plain
// races are TestDocumentedPolicies/session-limit's, with the least
// privilege, and TestSessionLimitRacingLogins's.

// putKind is the kind of the item a PutItem input writes, or "".
func putKind(in any) string {
	p, ok := in.(*dynamodb.PutItemInput)
	if !ok {
		return ""
	}
	s, _ := p.Item[item.AttrKind].(*types.AttributeValueMemberS)
	if s == nil {
		return ""
	}
	return s.Value
}

// slotsWrite reports whether in is an UpdateItem of a slots item.
func slotsWrite(in any) bool {
	u, ok := in.(*dynamodb.UpdateItemInput)
	if !ok {
		return false
	}
	sk, _ := u.Key["sk"].(*types.AttributeValueMemberS)
	return sk != nil && sk.Value == "SLOTS"
}

// A login at the limit whose slots write is made, its answer lost, and the
// SDK's retry refused by that very write: the claim, reading the slots
// again, finds its own slot there and keeps what it decided. Before, it
// took its own young slot for a login on its way and voided its own key,
// forgetting to end the session it had taken the slot of.
func TestSessionLimitLostSlotsAnswer(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.Limits.MaxSessions = 1 })
	alice := e.putUser("alice")
	old := e.login(alice)
	answerApplied(p, "UpdateItem", 1, slotsWrite, &types.ConditionalCheckFailedException{Message: aws.String("the retry met its own write")})
	w := newRecorder()
	if err := e.m.Login(w, newRequest(), alice, nil); err != nil {
		t.Fatal(err)
	}
	p.After = nil
	if got := e.status(sessionCookie(t, w.Result(), cookieName)); got != http.StatusOK {
		t.Errorf("the login whose slots answer was lost: status %d, want 200", got)
	}
	if got := e.status(old); got != http.StatusUnauthorized {
		t.Errorf("the session it took the slot of: status %d, want 401", got)
	}
}

// A login on its way whose session write is made, its answer lost, while a
// racing login takes its slot; the racer's void finds the session and ends
// it, and then the SDK's retry of the write comes. Before, the racer
// deleted the session, the retry found the key free and wrote it again:
// two sessions alive under a limit of 1, one of them missing from List.
// The void stays under the key, and the retry fails on it.
func TestSessionLimitVoidStopsARetriedWrite(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.Limits.MaxSessions = 1 })
	alice := e.putUser("alice")
	aAtPut, bAtVoid, aApplied, bDone := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	var aOnce, bOnce sync.Once
	var retried atomic.Bool
	p.Before = func(_ context.Context, _ string, in any) {
		switch putKind(in) {
		case item.KindSession: // A's write waits for B to reach its void
			aOnce.Do(func() { close(aAtPut); <-bAtVoid })
		case item.KindVoid: // and B's void for A's write
			bOnce.Do(func() { close(bAtVoid); <-aApplied })
		}
	}
	p.After = func(ctx context.Context, _ string, in, _ any, err error) error {
		if putKind(in) != item.KindSession || err != nil || !retried.CompareAndSwap(false, true) {
			return nil
		}
		close(aApplied) // A's write is made; its answer is lost
		<-bDone         // while the SDK backs off, B's login ends
		_, err = p.Engine().PutItem(ctx, in.(*dynamodb.PutItemInput))
		return err // the retry's answer
	}
	var a, b *http.Cookie
	var aErr error
	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		w := newRecorder()
		if aErr = e.m.Login(w, newRequest(), alice, nil); aErr == nil {
			a = sessionCookie(t, w.Result(), cookieName)
		}
	}()
	<-aAtPut
	go func() { defer close(bDone); b = e.login(alice) }()
	<-aDone
	<-bDone
	p.Before, p.After = nil, nil
	if !retried.Load() {
		t.Fatal("the staged race did not run")
	}
	if aErr != nil {
		t.Fatalf("the overtaken login: %v", aErr)
	}
	if got := e.status(a); got != http.StatusUnauthorized {
		t.Errorf("the overtaken login's session: status %d, want 401", got)
	}
	if got := e.status(b); got != http.StatusOK {
		t.Errorf("the racer's session: status %d, want 200", got)
	}
	if list := e.mustList(alice); len(list) != 1 {
		t.Errorf("List shows %d sessions, 1 is alive", len(list))
	}
}

// A session logged out soon after its login, whose young slot a login at
// the limit then takes and voids, and a request that read the session
// before the Logout writes data: ErrNoSession, and nothing lands in the
// void. Before, the data write's condition held on the void.
func TestSessionDataNeverLandsInAVoid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.Limits.MaxSessions = 1 })
	alice := e.putUser("alice")
	s := e.login(alice)
	e.inRequest(s, func(ctx context.Context) {
		if err := e.m.Logout(newRecorder(), newRequest(s)); err != nil {
			t.Fatal(err)
		}
		e.login(alice) // the slots hold s's, young, without its session: voided
		if len(e.itemsOf(item.KindVoid, "")) != 1 {
			t.Fatal("the login at the limit wrote no void")
		}
		err := e.m.UpdateData(ctx, func(json.RawMessage) (any, error) { return map[string]string{"secret": "x"}, nil })
		if !errors.Is(err, ddbsession.ErrNoSession) {
			t.Errorf("UpdateData of an ended session over its void: %v, want ErrNoSession; voids: %v", err, itemsText(e.itemsOf(item.KindVoid, "")))
		}
	})
}

// A login at the limit whose slots write is made, its answer lost, and a
// racing login that takes the young slot it made before the first reads
// the slots again: the first finds its key voided, and still ends the
// session its write took the slot of. Before, it claimed again, forgot
// that session, and left it alive without a slot: 2 alive under a limit of
// 1 after the next login.
func TestSessionLimitLostSlotsAnswerThenRacer(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.Limits.MaxSessions = 1 })
	alice := e.putUser("alice")
	old := e.login(alice)
	var once atomic.Bool
	var racer *http.Cookie
	p.After = func(_ context.Context, _ string, in, _ any, err error) error {
		if err != nil || !slotsWrite(in) || !once.CompareAndSwap(false, true) {
			return nil
		}
		racer = e.login(alice) // takes the young slot before the first reads the slots again
		return &types.ConditionalCheckFailedException{Message: aws.String("the answer of a write that was made")}
	}
	w := newRecorder()
	if err := e.m.Login(w, newRequest(), alice, nil); err != nil {
		t.Fatal(err)
	}
	p.After = nil
	first := sessionCookie(t, w.Result(), cookieName)
	if got := e.status(old); got != http.StatusUnauthorized {
		t.Errorf("the session the first login's write took the slot of: status %d, want 401", got)
	}
	if e.status(racer) != http.StatusOK || e.status(first) != http.StatusUnauthorized {
		t.Error("the racer, which took the first login's slot, is not the one alive")
	}
	next, alive := e.login(alice), 0
	for _, c := range []*http.Cookie{old, racer, first, next} {
		if e.status(c) == http.StatusOK {
			alive++
		}
	}
	if alive != 1 {
		t.Errorf("after one more login, %d alive under a limit of 1", alive)
	}
}

// MREC: the end record of a session a login at the limit ends is written
// even for a login on its way, whose session is known by its key alone, so
// that no write of it in another Region outlives its slot.
func TestSessionLimitEndsALoginOnItsWayInMREC(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.Limits.MaxSessions, c.Layout.MREC = 1, true })
	alice := e.putUser("alice")
	var once atomic.Bool
	var racer *http.Cookie
	p.Before = func(_ context.Context, _ string, in any) {
		if putKind(in) == item.KindSession && once.CompareAndSwap(false, true) {
			racer = e.login(alice)
		}
	}
	first := e.login(alice)
	p.Before = nil
	if e.status(first) != http.StatusUnauthorized || e.status(racer) != http.StatusOK {
		t.Error("of a login on its way and the racer that took its slot, the racer is not the one alive")
	}
	if got := len(e.itemsOf(item.KindEnded, "")); got != 1 {
		t.Errorf("%d end records, want 1: the overtaken login's", got)
	}
}

// A login at the limit whose slots write is made and answered with an
// error, here a deadline: the login fails, and still ends the session its
// write took the slot of, which would otherwise live on without one (2
// alive under a limit of 1 after the next login). Its eviction's own write
// failing once is tried again.
func TestSessionLimitFailedLoginEndsWhatItTook(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.Limits.MaxSessions = 1 })
	alice := e.putUser("alice")
	old := e.login(alice)
	var slotsOnce, voidOnce atomic.Bool
	p.After = func(_ context.Context, _ string, in, _ any, err error) error {
		if err != nil {
			return nil
		}
		if slotsWrite(in) && slotsOnce.CompareAndSwap(false, true) {
			return context.DeadlineExceeded // made, and answered with an error
		}
		if putKind(in) == item.KindVoid && voidOnce.CompareAndSwap(false, true) {
			return &types.InternalServerError{Message: aws.String("the void's first answer")}
		}
		return nil
	}
	if err := e.m.Login(newRecorder(), newRequest(), alice, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the login whose slots write was answered with an error: %v", err)
	}
	p.After = nil
	if !voidOnce.Load() {
		t.Fatal("the failed login wrote no void")
	}
	if got := e.status(old); got != http.StatusUnauthorized {
		t.Errorf("the session its write took the slot of: status %d, want 401", got)
	}
	next, alive := e.login(alice), 0
	for _, c := range []*http.Cookie{old, next} {
		if e.status(c) == http.StatusOK {
			alive++
		}
	}
	if alive != 1 {
		t.Errorf("after one more login, %d alive under a limit of 1", alive)
	}
}

// Refuse mode: a login whose session write is applied but answered with an
// error (its answer lost, and the SDK's retry refused by that very write)
// fails, and leaves no live session in its slot: its undo voids the key. The
// user's next login is not refused, as it was, until the orphan expired.
func TestSessionLimitRefuseLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), withMaxSessions(1), func(c *ddbsession.Config[User]) { c.Limits.RefuseAtMaxSessions = true })
	alice := e.putUser("alice")
	answerApplied(p, "PutItem", 0, func(in any) bool { return putKind(in) == item.KindSession }, errLost)
	if err := e.m.Login(newRecorder(), newRequest(), alice, nil); err == nil {
		t.Fatal("the login whose session write's answer was lost succeeded")
	}
	p.After = nil
	if list := e.mustList(alice); len(list) != 0 {
		t.Errorf("List after the failed login = %+v, want none", list)
	}
	w := newRecorder()
	if err := e.m.Login(w, newRequest(), alice, nil); err != nil {
		t.Fatalf("the next login: %v, want a session", err)
	}
	if got := e.status(sessionCookie(t, w.Result(), cookieName)); got != http.StatusOK {
		t.Errorf("the next login's session: %d, want 200", got)
	}
}
