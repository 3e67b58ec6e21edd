package ddbsession

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/decide"
	"github.com/ddbsession/ddbsession/internal/item"
)

// This file signs users up, in and out: CreateUser, Login, LoginBearer and
// Logout, and what they share.

// CreateUser writes a new user item: v is the app's own value (a struct or
// a map, encoded with attributevalue.MarshalMap, holding the table's key),
// and CreateUser stamps it with a random sessions version of its own, so
// that no session of a deleted user with the same key is valid for it. It
// returns [ErrUserExists], writing nothing, if an item with that key
// exists. An app that writes user items itself writes the same
// (docs/item-format.md#user-items).
func (m *Manager[U]) CreateUser(ctx context.Context, v any) error {
	return wrap("create user", m.createUser(ctx, v))
}

func (c *core) createUser(ctx context.Context, v any) error {
	av, err := attributevalue.MarshalMap(v)
	if err != nil {
		return fmt.Errorf("encode %T: %w", v, err)
	}
	var key UserKey
	for _, k := range []struct {
		name string
		to   *string
	}{{c.store.PartitionKey, &key.PK}, {c.store.SortKey, &key.SK}} {
		s, ok := av[k.name].(*types.AttributeValueMemberS)
		if k.name != "" && !ok {
			return fmt.Errorf("%T has no String attribute %q, the table's key", v, k.name)
		}
		if ok {
			*k.to = s.Value
		}
	}
	if err := c.users.checkKey(key, true); err != nil {
		return err
	}
	// Not cut short by the client: a user made and not yet cleared of a
	// former user's items must be undone.
	ctx, cancel := c.storeContext(context.WithoutCancel(ctx))
	defer cancel()
	if err := c.read.CheckLayout(ctx); err != nil {
		return err
	}
	work, cancelWork := c.workContext(ctx)
	defer cancelWork()
	created, err := c.store.createUser(work, av)
	if err == nil && created {
		if err = c.forgetFormerUser(work, key); err != nil {
			// Undone, so that the app's retry does it all, rather than
			// find the user made and half cleared.
			c.store.undoUser(ctx, av)
		}
	}
	switch {
	case err != nil:
		return err
	case !created:
		return ErrUserExists
	}
	return nil
}

// forgetFormerUser has the user just made under key inherit nothing of a
// former user of the key (see store.forgetFormerUser; a revocation item,
// under MREC).
func (c *core) forgetFormerUser(ctx context.Context, key UserKey) error {
	if c.keepHistory > 0 {
		if err := c.store.forgetFormerUser(ctx, key, c.now()); err != nil {
			return err
		}
	}
	if c.store.MREC {
		// A revocation item outlives a user item deleted before this one,
		// with a version that sessions of release v0.1.0, which have no
		// stamp of the user item's own version, copied: change it.
		return c.store.changeRevocation(ctx, key.PK, key.SK, time.Time{})
	}
	return nil
}

// Login signs user in on this browser once verify accepts the user as read,
// in the same call, from the user item: verify checks the password (or other
// credential) and returns an error, which Login returns as it is, to refuse.
// A flow whose credential is not in the user item (a single sign-on
// callback) passes nil. methods name how the user proved themselves
// ("password", "otp", "passkey"), for [Session.Methods]. A user without an
// item gets [ErrUserNotFound], and nothing is written.
//
// It rotates the session: every session the request carries is deleted
// first (no session fixation), and a new session with a fresh token is
// created and sent in the cookie. A Login on a request that carried the
// same user's live session is a re-authentication: the new session gets a
// fresh AuthenticatedAt and hands on the old one's data; the user's other
// sessions are left alone.
//
// The session copies the revocation versions read with the credential, so
// a login that read a password before a change and its RevokeAll dies with
// the other sessions, whatever the clocks say. verify runs within the
// call's StoreTimeout, between the read and the writes: a slow password
// hash fits, a queue for one does not.
func (m *Manager[U]) Login(w http.ResponseWriter, r *http.Request, user UserKey, verify func(U) error, methods ...string) error {
	var u U
	_, err := m.signInBrowser(w, r, signIn{user: user, out: &u, verify: verifier(&u, verify), methods: methods, end: endAll, read: m.stored(r)})
	return wrap("login", err)
}

// verifier is verify bound to the user that the sign-in reads into u; nil
// for a nil verify.
func verifier[U any](u *U, verify func(U) error) func() error {
	if verify == nil {
		return nil
	}
	return func() error { return verify(*u) }
}

// signInBrowser is Login's, CompleteLogin's and Adopt's: a session in a
// cookie, offered for device binding if configured.
func (c *core) signInBrowser(w http.ResponseWriter, r *http.Request, in signIn) (signedIn, error) {
	out, err := c.signIn(r, in)
	if err != nil {
		return out, err
	}
	c.cookies.set(w, out.token, out.session, out.now)
	if out.device != "" {
		c.cookies.setDevice(w, out.device)
	}
	if c.binding.Enabled {
		c.binding.offer(w, out.session)
	}
	c.warnIfDropped(r)
	return out, nil
}

// warnIfDropped logs, once per Manager, that the Secure session cookie
// just set answers a plain-HTTP request for a host other than localhost,
// with no proxy saying the client's connection was HTTPS: browsers keep
// Secure cookies from https:// and from http://localhost only, so this
// login "succeeds" and every next request is signed out.
func (c *core) warnIfDropped(r *http.Request) {
	if !c.cookies.secure || r.TLS != nil || r.Header.Get("X-Forwarded-Proto") != "" || loopbackHost(r.Host) {
		return
	}
	c.insecureOnce.Do(func() {
		c.logger.WarnContext(r.Context(), "ddbsession: a Secure session cookie answers a plain-HTTP request, and browsers drop it except on localhost: "+
			"every request after this login will be signed out; serve HTTPS (a TLS proxy in front sets X-Forwarded-Proto), "+
			"or set Config.Cookie.InsecureDevMode for local development over HTTP", "host", r.Host)
	})
}

// loopbackHost reports whether host (with or without a port) is one that
// browsers treat as a secure context over plain HTTP: localhost, a name
// under .localhost, or a loopback address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}

// LoginBearer signs user in for a client without cookies (a CLI, a mobile
// app) and returns the session's credential and expiry instead of setting a
// cookie: the client sends it as "Authorization: Bearer <token>", which
// RequireSession accepts with [Config.BearerTokens], and a refresh says the
// new expiry in the Session-Expires response header; with a DPoP proof, it
// is bound to the proof's key (token_type "DPoP"). verify and methods are
// [Manager.Login]'s, and so is the session, listed and revocable. A bearer
// token the request carries ends, its cookies do not; the user's own is a
// re-authentication. Bearer requests need no cross-origin protection: no
// browser adds an Authorization header on its own.
func (m *Manager[U]) LoginBearer(r *http.Request, user UserKey, verify func(U) error, methods ...string) (token string, expires time.Time, err error) {
	if !m.cookies.bearer {
		// Every guarded route would refuse the token: say so now.
		return "", time.Time{}, errors.New("ddbsession: login: Config.BearerTokens is off, so RequireSession would refuse every bearer token: turn it on to use LoginBearer")
	}
	key, err := m.dpop.login(r, m.now())
	if err != nil {
		return "", time.Time{}, err
	}
	var u U
	out, err := m.signIn(r, signIn{user: user, out: &u, verify: verifier(&u, verify), methods: methods, end: endBearer, read: m.stored(r), dpopKey: key})
	if err != nil {
		return "", time.Time{}, wrap("login", err)
	}
	return m.cookies.value(out.token, out.session), out.session.ExpiresAt, nil
}

// signIn is one login: whose, how the user proved themselves, and what of
// the request it ends.
type signIn struct {
	user    UserKey
	out     any          // the user is read into it
	verify  func() error // checks the user as read; nil for nothing to check
	methods []string
	end     carried
	// pending is the pending session that CompleteLogin completes, which
	// the sign-in deletes before it creates the session, or nil.
	pending *item.Session
	// read is the session item that RequireSession read in the request,
	// if any: ending it needs no read of its own.
	read item.Session
	// dpopKey is the thumbprint of the key of a bearer login's DPoP proof,
	// to which it binds the session; "" for none.
	dpopKey string
	// adoptedAt, for Adopt, is when the user proved themselves to the old
	// store (zero: unknown); nil for a login.
	adoptedAt *time.Time
}

// Bounds of the methods of one authentication, which every request reads
// with its session.
const (
	maxMethods   = 4
	maxMethodLen = 32
)

// checkSignIn refuses, before any call, a user key that does not fit the
// table and methods beyond their bounds.
func (c *core) checkSignIn(user UserKey, methods []string) error {
	if err := c.users.checkKey(user, true); err != nil {
		return err
	}
	if len(methods) > maxMethods {
		return fmt.Errorf("%d methods, more than %d", len(methods), maxMethods)
	}
	for _, m := range methods {
		if m == "" || len(m) > maxMethodLen || strings.ContainsFunc(m, func(r rune) bool { return r < '!' || r > '~' }) {
			return fmt.Errorf("method %q: want 1 to %d printable ASCII characters", m, maxMethodLen)
		}
	}
	return nil
}

// signedIn is what a sign-in made: the new session's token, the session,
// and the time the sign-in took as now.
type signedIn struct {
	token   string
	session item.Session
	now     time.Time
	device  string // the device cookie's ID, with Cookie.RememberDevices
}

// signIn reads the user into in.out and has in.verify, if not nil, check
// it; ends the sessions the request carries as in.end says; and creates a
// new session, which takes a slot under Limits.MaxSessions.
func (c *core) signIn(r *http.Request, in signIn) (signedIn, error) {
	if err := c.checkSignIn(in.user, in.methods); err != nil {
		return signedIn{}, err
	}
	// Not cut short by the client: a half-done rotation helps no one. The
	// work leaves time for the undo within the one deadline.
	ctx, cancel := c.storeContext(context.WithoutCancel(r.Context()))
	defer cancel()
	work, cancelWork := c.workContext(ctx)
	defer cancelWork()
	now := c.now()
	f, err := c.prove(work, in, c.limit.max > 0, now)
	if err != nil {
		c.recordRefusal(work, in.user, in.verify != nil, r, now, err)
		return signedIn{}, err
	}
	ended, err := c.endRequestSessions(work, r, in.end, EventRotated, in.read)
	if err != nil {
		return signedIn{}, err
	}
	s, reauth := c.newSignedIn(r, in, &f, ended, now)
	token := item.NewToken()
	sessionPK := c.store.SessionPK(token)
	from, err := c.handOnData(work, &s, sessionPK, ended)
	if err != nil {
		return signedIn{}, err
	}
	var evicted []item.Session
	if c.limit.max > 0 {
		if evicted, err = c.claim(ctx, work, in.user, &f, sessionPK, s, ended, now); err != nil {
			if errors.Is(err, ErrTooManySessions) {
				c.events.emit(ctx, Event{Kind: EventRefusedAtMaxSessions, User: in.user})
			}
			return signedIn{}, err
		}
	}
	indexTTL := s.CreatedAt.Add(c.life.absolute)
	// device is the browser's device ID, newDevice its digest if it is
	// new to the user.
	var device, newDevice string
	made := false
	if c.cookies.device != "" && in.end == endAll {
		device = c.cookies.deviceOf(r)
		digest := deviceDigest(in.user, device)
		fromNew, err := c.store.seeDevice(work, in.user, digest, now, now.Add(deviceLifetime))
		if err != nil {
			return signedIn{}, err
		}
		if fromNew {
			// A sign-in that fails from here on leaves the device new,
			// for the next one from it to report.
			defer func() {
				if !made {
					c.store.forgetDevice(ctx, in.user, digest, now)
				}
			}()
		}
		// The old store's browser is no new device: recorded, not reported.
		if fromNew && in.adoptedAt == nil {
			newDevice = digest
		}
	}
	// The sign-in's record goes first, so that no session is made without
	// it; a login that fails after it leaves it.
	kind := EventCreated
	switch {
	case in.adoptedAt != nil:
		kind = EventAdopted
	case newDevice != "": // in the history, the sign-in's record
		kind = EventNewDevice
	case reauth:
		kind = EventReauthenticated
	}
	if err := c.record(work, kind, in.user, s, newDevice, now); err != nil {
		return signedIn{}, err
	}
	err = c.store.createSession(ctx, work, sessionPK, s, indexTTL, c.voidUntil(), func() error { return c.evict(ctx, work, evicted) })
	overtaken := c.overtaken(ctx, sessionPK, err)
	if err != nil && !overtaken {
		return signedIn{}, err
	}
	if from.SessionPK != "" {
		c.store.deleteData(ctx, from.SessionPK, from.DataRev)
	}
	c.events.emit(ctx, Event{Kind: EventCreated, SessionID: s.ID, User: in.user})
	if reauth {
		c.events.emit(ctx, Event{Kind: EventReauthenticated, SessionID: s.ID, User: in.user})
	}
	if newDevice != "" {
		c.events.emit(ctx, Event{Kind: EventNewDevice, SessionID: s.ID, User: in.user, Time: s.CreatedAt,
			Address: s.Address, UserAgent: s.UserAgent, Device: newDevice, Methods: s.Methods})
	}
	if overtaken {
		c.events.emit(ctx, Event{Kind: EventEvicted, SessionID: s.ID, User: in.user, Reason: ReasonSessionLimit})
	}
	made = true
	return signedIn{token: token, session: s, now: now, device: device}, nil
}

// prove reads the user of in into in.out, with everything that stamps a
// session of theirs, and has in.verify check it. Completing a two-step
// login, it first makes sure the user's sessions were not revoked since
// the first step, and then takes the pending session, which one of racing
// completions alone gets.
func (c *core) prove(ctx context.Context, in signIn, withSlots bool, now time.Time) (decide.Facts, error) {
	// The global generation comes from this instance's copy, unless the
	// copy is stale and this read takes it: either way as it was before
	// the credential was checked, so that a RevokeEveryone after this
	// point ends the session.
	f, err := c.read.Read(ctx, decide.Query{UserPK: in.user.PK, UserSK: in.user.SK, Slots: withSlots, Into: in.out})
	if err != nil {
		return f, err
	}
	if !f.UserFound {
		return f, ErrUserNotFound
	}
	if err := c.users.decode(&f, in.out); err != nil {
		return f, err
	}
	if err := c.versioned(ctx, in.user, &f); err != nil {
		return f, err
	}
	last := f.RevokedAt
	if f.EveryoneAt.After(last) {
		last = f.EveryoneAt
	}
	if in.adoptedAt != nil && !last.IsZero() && !in.adoptedAt.After(last) {
		// A RevokeAll or RevokeEveryone since the old store's sign-in
		// (ever, if unknown) ended its sessions too.
		return f, rejected(ReasonRevoked)
	}
	if in.pending != nil && c.judge(&f, *in.pending) != "" {
		// The user's sessions were revoked (a password change) between
		// the two steps: the first step's proof is void.
		if _, _, err := c.store.deleteSession(ctx, *in.pending); err != nil {
			return f, err
		}
		return f, rejected(ReasonRevoked)
	}
	if in.verify != nil {
		if err := in.verify(); err != nil {
			return f, &appError{err}
		}
	}
	if in.pending != nil {
		if _, found, err := c.store.deleteSession(ctx, *in.pending); err != nil || !found {
			return f, cmp.Or(err, rejected(ReasonUnknown))
		}
	}
	return f, nil
}

// versioned refuses, loudly, a login of a user without a sessions version:
// nothing tells a user item made anew under the same key from the one
// before it, so every session of it would be the new one's too. It is the
// app's bug, which the error (and the log, where an app might show it as a
// wrong password) says how to fix.
func (c *core) versioned(ctx context.Context, key UserKey, f *decide.Facts) error {
	if f.Stamp.User != 0 {
		return nil
	}
	var err error
	if c.users.inTable() {
		err = fmt.Errorf("the user item %s has no %s (Layout.VersionAttribute), a Number the library needs: "+
			"CreateUser writes one; an app that writes its own user items writes a random non-zero one when it creates an item "+
			"(see https://github.com/ddbsession/ddbsession/blob/main/docs/item-format.md#user-items)", keyString(key), c.store.VersionAttribute)
	} else {
		err = fmt.Errorf("Config.LoadUser returned version 0 for user %s: return the user's sessions version, non-zero, "+
			"which the app's store changes whenever the user is made anew, changes their credential, or ends their sessions", keyString(key))
	}
	c.logger.ErrorContext(ctx, "ddbsession: a login failed for a user without a sessions version", "err", err)
	return err
}

// newSignedIn returns the session that sign-in in, on request r, creates
// at now for a user of whom a Read found f, having ended the sessions
// ended; and whether it is a re-authentication.
func (c *core) newSignedIn(r *http.Request, in signIn, f *decide.Facts, ended []item.Session, now time.Time) (item.Session, bool) {
	// The session copies the stamp read with the credential: a RevokeAll,
	// a new credential, a user item made anew or a RevokeEveryone after
	// that read, on any instance and whatever its clock, ends it. Its
	// times are this instance's own.
	s := c.life.newSession(in.user, r, now)
	s.Stamp = f.Stamp
	s.Methods = in.methods
	browser := in.end == endAll
	s.BrowserOnly = browser && c.keepSignedIn != nil && !c.keepSignedIn(r)
	if in.pending != nil {
		s.Methods = union(in.pending.Methods, in.methods)
		s.BrowserOnly = in.pending.BrowserOnly // KeepSignedIn asked the first step
		// Authenticated as of the first factor: a password proven minutes
		// ago counts from then.
		if in.pending.AuthAt.Before(s.AuthAt) {
			s.AuthAt = in.pending.AuthAt
		}
	}
	s.DPoP, s.DPoPKey = in.dpopKey != "", in.dpopKey
	if in.adoptedAt != nil {
		// No credential was shown here: the old store's sign-in, or for
		// an unknown one the epoch, which no freshness check passes.
		s.AuthAt = time.UnixMilli(min(max(in.adoptedAt.UnixMilli(), 0), s.AuthAt.UnixMilli()))
	}
	reauth := false
	for _, old := range ended {
		// The user's own live session: a re-authentication, which hands
		// on what the app keeps in it and the kind of its cookie.
		if userOf(old) == in.user && !old.Pending && c.life.live(old, now) && c.judge(f, old) == "" {
			s.Data, s.DataApart, s.DataRev, s.BrowserOnly, reauth = old.Data, old.DataApart, old.DataRev, old.BrowserOnly, true
		}
	}
	if browser && c.binding.Enabled {
		// The challenge of the offer to bind, which the Login response
		// makes, goes in with the session: it costs no write of its own.
		s.Challenge = challengeFor(now, registrationChallengeLifetime)
	}
	return s, reauth
}

// handOnData copies the data item of the session whose data kept apart a
// re-authentication handed on to s (newSignedIn), to s's own, under
// sessionPK, and returns that session, whose data item the login deletes
// once s is in. Its session ended, the item is still there: only Logout,
// UpdateData's next write and its TTL remove one. Data that is gone is no
// data.
func (c *core) handOnData(ctx context.Context, s *item.Session, sessionPK string, ended []item.Session) (item.Session, error) {
	if !s.DataApart {
		return item.Session{}, nil
	}
	for _, old := range ended {
		if !old.DataApart || old.DataRev != s.DataRev {
			continue
		}
		av, err := c.store.get(ctx, c.store.DataKey(old.SessionPK, old.DataRev))
		if err != nil {
			return item.Session{}, err
		}
		data, err := item.DecodeData(av)
		if av == nil || err != nil {
			break
		}
		return old, c.store.put(ctx, c.store.EncodeData(sessionPK, s.DataRev, data, s.CreatedAt.Add(c.life.absolute)))
	}
	s.DataApart, s.DataRev = false, 0
	return item.Session{}, nil
}

// union is a then the methods of b that a lacks, in order.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, m := range b {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// Logout ends every session the request carries, cookie or bearer token,
// by deleting it (its token is dead on every instance), and clears the
// cookie even when a delete fails, returning the error so that the app can
// say the sign-out did not complete. [Cookie.ClearSiteData] adds its header.
func (m *Manager[U]) Logout(w http.ResponseWriter, r *http.Request) error {
	m.cookies.clear(w)
	if m.clearSiteData != "" {
		w.Header().Set("Clear-Site-Data", m.clearSiteData)
	}
	if len(r.CookiesNamed(m.binding.CookieName)) > 0 {
		m.binding.writeCookie(w, "", -1)
	}
	ctx, cancel := m.storeContext(context.WithoutCancel(r.Context()))
	defer cancel()
	if err := m.read.CheckLayout(ctx); err != nil {
		return wrap("logout", err)
	}
	pendingErr := m.endPending(ctx, w, r)
	ended, err := m.endRequestSessions(ctx, r, endAll, EventEnded, m.stored(r))
	for _, s := range ended {
		if s.DataApart {
			m.store.deleteData(ctx, s.SessionPK, s.DataRev)
		}
	}
	return wrap("logout", errors.Join(pendingErr, err))
}
