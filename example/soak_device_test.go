package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// soakDevice is one browser, or one command-line client with a bearer
// token, of one user: it signs in, browses the guarded pages, revokes the
// user's other sessions, logs out and signs in again, checking each answer
// with the model as it goes. Each runs in a goroutine of its own; the
// model is what they share.
type soakDevice struct {
	m      *soakModel
	user   *soakUser
	name   string
	bearer bool
	base   string
	client *http.Client // with a cookie jar for a browser
	rng    *mrand.Rand
	sess   *soakSession // the session it is signed in with, or nil
	ua     string       // the User-Agent of its latest sign-in
	n      int          // sign-ins so far, numbering their User-Agents
}

func newSoakDevice(m *soakModel, sa *soakApp, u *soakUser, name string, bearer bool, rng *mrand.Rand) *soakDevice {
	return &soakDevice{m: m, user: u, name: name, bearer: bearer, base: sa.web.URL, client: sa.web.Client(!bearer), rng: rng}
}

// start is the device's first round: the first device of each user signs
// the user up, the others wait for the account; then it signs in and
// makes every kind of request once (tour).
func (d *soakDevice) start(signsUp bool) {
	if signsUp {
		d.signup()
	}
	<-d.user.ready
	for range soakRetries {
		if d.sess != nil {
			break
		}
		d.login(nil)
	}
	d.tour()
}

// step is one request of a later round: signed in, one thing a user does
// (act); signed out, a login, or now and then a wrong password.
func (d *soakDevice) step() {
	if d.sess != nil {
		d.act()
	} else if d.rng.IntN(20) == 0 {
		d.wrongPassword()
	} else {
		d.login(nil)
	}
}

// act does one thing a signed-in user does, at random. Most requests
// browse, as a signed-in user's do; logins, each a password hash, are
// rarer.
func (d *soakDevice) act() {
	switch x := d.rng.IntN(100); {
	case x < 35:
		d.me()
	case x < 55:
		d.sessions()
	case x < 67:
		d.account()
	case x < 73:
		d.revokeOther()
	case x < 75:
		d.revokeForeign()
	case x < 76:
		d.revokeUnknown()
	case x < 84:
		d.forged()
	case x < 86:
		d.login(d.sess) // signs in again, ending the session it has
	default:
		d.logout()
	}
}

// tour makes each kind of request once, so that even a run of no
// duration (TestSoak's warm-up) goes through every handler: what they
// build on first use (the User-Agent parser of the account page, the
// common-password set) is then in the baseline of TestSoak's heap. It
// ends signed out.
func (d *soakDevice) tour() {
	for _, step := range []func(){d.me, d.sessions, d.account, d.forged, d.revokeUnknown, d.revokeForeign, d.revokeOther,
		func() { d.login(d.sess) }, d.logout, d.wrongPassword} {
		if d.sess == nil {
			d.login(nil)
		}
		if d.sess != nil {
			step()
		}
	}
}

// send sends a request from the device, with its credential, and records
// the answer under kind. header is name, value pairs.
func (d *soakDevice) send(kind, method, path, body string, header ...string) soakResponse {
	r, err := http.NewRequest(method, d.base+path, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	r.Header.Set("User-Agent", d.ua)
	if d.bearer && d.sess != nil {
		r.Header.Set("Authorization", "Bearer "+d.sess.cred)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return d.do(kind, r)
}

// do sends r as it is, with the device's client.
func (d *soakDevice) do(kind string, r *http.Request) soakResponse {
	return d.doWith(d.client, kind, r)
}

func (d *soakDevice) doWith(client *http.Client, kind string, r *http.Request) soakResponse {
	res := soakResponse{sent: d.m.seq.Add(1)}
	began := time.Now()
	answer, err := client.Do(r)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(answer.Body)
		answer.Body.Close()
		res.code, res.body, res.header = answer.StatusCode, string(b), answer.Header
	}
	res.answered = d.m.seq.Add(1)
	d.m.record(kind, res.code, time.Since(began))
	if err != nil {
		d.m.fail("%s %s from %s: %v", r.Method, r.URL.Path, d.name, err)
	}
	return res
}

func (d *soakDevice) form(kind, path string, form url.Values) soakResponse {
	return d.send(kind, "POST", path, form.Encode(), "Content-Type", "application/x-www-form-urlencoded")
}

// nextUA gives the next sign-in a User-Agent of its own, by which List
// shows the session it makes.
func (d *soakDevice) nextUA() string {
	d.n++
	d.ua = "soak/" + d.user.name + "/" + d.name + "/" + strconv.Itoa(d.n)
	return d.ua
}

// pause waits a little after a 503 before trying again, as a user would,
// on the soak's virtual clock.
func (d *soakDevice) pause() { time.Sleep(time.Duration(5+d.rng.IntN(20)) * time.Millisecond) }

// cookie is the session cookie in the browser's jar, or "".
func (d *soakDevice) cookie() string {
	u, _ := url.Parse(d.base)
	for _, c := range d.client.Jar.Cookies(u) {
		if c.Name == cookieName {
			return c.Value
		}
	}
	return ""
}

// signup creates the account, trying again after a 503 as long as it
// takes: the checks after each round need every user. A 409 says
// that the name is taken, which only this device's own earlier try can
// have done: a sign-up whose CreateUser was applied but its answer lost.
func (d *soakDevice) signup() {
	defer close(d.user.ready)
	for {
		a := d.m.attempt(d.user, d.nextUA(), "sign-up")
		res := d.form("sign-up", "/signup", url.Values{"username": {d.user.name}, "password": {d.user.password}, "remember": {"on"}})
		switch {
		case res.code == http.StatusSeeOther && res.location() == "/":
			d.sess = d.m.answered(a, res, d.cookie(), true)
		case res.code == http.StatusConflict:
			d.m.answered(a, res, "", false)
		case res.code == http.StatusServiceUnavailable:
			d.m.answered(a, res, "", false)
			d.pause()
			continue
		default:
			d.m.fail("sign-up of %s: %d, want 303, 409 or 503; body: %.300s", d.user.name, res.code, res.body)
		}
		return
	}
}

// login signs in with the right password. carried, if not nil, is the
// session the device holds, which the login ends (rotates).
func (d *soakDevice) login(carried *soakSession) {
	kind := "login"
	if d.bearer {
		kind = "api login"
	}
	if carried != nil {
		kind += ", signed in"
		d.m.beginEnd(carried)
	}
	a := d.m.attempt(d.user, d.nextUA(), kind)
	var res soakResponse
	if d.bearer {
		body, _ := json.Marshal(loginRequest{Username: d.user.name, Password: d.user.password})
		res = d.send(kind, "POST", "/api/login", string(body), "Content-Type", "application/json")
	} else {
		remember := ""
		if d.rng.IntN(2) == 0 {
			remember = "on"
		}
		res = d.form(kind, "/login", url.Values{"username": {d.user.name}, "password": {d.user.password}, "remember": {remember}})
	}
	var cred string
	switch {
	case d.bearer && res.code == http.StatusOK:
		var tok tokenJSON
		if err := json.Unmarshal([]byte(res.body), &tok); err != nil || tok.Token == "" {
			d.m.fail("%s of %s: 200 without a token: %.300s", kind, d.user.name, res.body)
		}
		cred = tok.Token
		d.m.secrets.Add("a bearer token issued", cred)
	case !d.bearer && res.code == http.StatusSeeOther && res.location() == "/":
		if cred = d.cookie(); cred == "" || (carried != nil && cred == carried.cred) {
			d.m.fail("%s of %s: 303 without a new session cookie", kind, d.user.name)
		}
	case res.code == http.StatusServiceUnavailable:
		d.m.answered(a, res, "", false)
		if carried != nil {
			// The old session may be gone, or not: the device keeps it,
			// and its next request tells.
			d.m.endUncertain(carried)
		}
		d.pause()
		return
	default:
		d.m.fail("%s of %s with the right password: %d; body: %.300s", kind, d.user.name, res.code, res.body)
		return
	}
	if carried != nil {
		d.m.ended(carried, res.answered, "a login that rotated it")
	}
	d.sess = d.m.answered(a, res, cred, !d.bearer)
}

// wrongPassword tries to log in with a wrong password, which must fail.
func (d *soakDevice) wrongPassword() {
	a := d.m.attempt(d.user, d.nextUA(), "wrong password")
	res := d.form("wrong password", "/login", url.Values{"username": {d.user.name}, "password": {"not " + d.user.password}})
	d.m.answered(a, res, "", false)
	if res.code != http.StatusUnauthorized && res.code != http.StatusServiceUnavailable {
		d.m.fail("login of %s with a wrong password: %d, want 401 (or 503); body: %.300s", d.user.name, res.code, res.body)
	}
}

// guarded checks the answer of a request that needs the device's session:
// let through (true), refused, or 503. A refused device is signed out.
func (d *soakDevice) guarded(res soakResponse, what string) bool {
	s := d.sess
	switch {
	case res.code == http.StatusOK:
		d.m.let(s, res, what)
		return true
	case res.code == http.StatusUnauthorized || res.toLogin():
		d.m.refused(s, res, what)
		d.sess = nil
	case res.code == http.StatusServiceUnavailable:
	default:
		d.m.fail("%s for %s: %d; body: %.300s", what, s, res.code, res.body)
	}
	return false
}

// me checks GET /api/me: the session's user, and no one else.
func (d *soakDevice) me() {
	s := d.sess
	res := d.send("GET /api/me", "GET", "/api/me", "")
	if !d.guarded(res, "GET /api/me") {
		return
	}
	var u User
	if err := json.Unmarshal([]byte(res.body), &u); err != nil || u.Username != s.user.name {
		d.m.fail("GET /api/me for %s: %.300s, want user %s", s, res.body, s.user.name)
	}
}

// account checks the account page, which names the user.
func (d *soakDevice) account() {
	s := d.sess
	res := d.send("GET /account", "GET", "/account", "")
	if d.guarded(res, "GET /account") && !strings.Contains(res.body, "Signed in as <strong>"+s.user.name+"</strong>") {
		d.m.fail("GET /account for %s does not name %s", s, s.user.name)
	}
}

// sessions checks GET /api/sessions, and learns the IDs it shows.
func (d *soakDevice) sessions() {
	s := d.sess
	res := d.send("GET /api/sessions", "GET", "/api/sessions", "")
	if !d.guarded(res, "GET /api/sessions") {
		return
	}
	var list []sessionJSON
	if err := json.Unmarshal([]byte(res.body), &list); err != nil {
		d.m.fail("GET /api/sessions for %s: %v in %.300s", s, err, res.body)
		return
	}
	d.m.listed(s, list, res.sent, "GET /api/sessions")
}

// revoke posts POST /sessions/revoke for id, with the device's session.
// It reports the answer, and false if the device's own session was
// refused, or needed a re-authentication that did not come about.
//
// The route needs an authentication within the app's -reauth (10
// minutes), which four rounds of the soak pass: then the device signs in
// again on the session it holds, a re-authentication (as the app's /reauth
// does, by the same Login), and tries again. A step-up sooner than half
// that after a re-authentication, on the app's clock, means it did not
// count.
func (d *soakDevice) revoke(kind, id string) (soakResponse, bool) {
	var reauthenticated time.Time
	for try := 0; ; try++ {
		res := d.form(kind, "/sessions/revoke", url.Values{"id": {id}})
		if res.stepUp() {
			held := d.sess
			if try > 0 && time.Since(reauthenticated) < defaultReauth/2 {
				d.m.fail("%s from %s: a step-up %v after a re-authentication: %d %s", kind, held, time.Since(reauthenticated), res.code, res.header.Get("WWW-Authenticate")+res.location())
				return res, false
			}
			d.m.let(held, res, kind+" (step-up)") // the guard let the session through
			if d.login(held); d.sess == held || try == soakRetries {
				return res, false // the re-authentication failed (503), or keeps being too old
			}
			reauthenticated = time.Now()
			continue
		}
		if res.code == http.StatusUnauthorized || res.toLogin() {
			d.guarded(res, kind)
			return res, false
		}
		return res, true
	}
}

// revokeOther revokes another of the user's sessions, as the "sign out
// that device" button does.
func (d *soakDevice) revokeOther() {
	target := d.m.target(d.user, d.sess, d.rng.IntN)
	if target == nil {
		d.sessions()
		return
	}
	d.m.mu.Lock()
	id := target.id
	d.m.mu.Unlock()
	d.m.beginEnd(target)
	res, ok := d.revoke("revoke", id)
	switch {
	case !ok:
		d.m.abandonEnd(target) // refused before the handler ran
	case res.code == http.StatusSeeOther && res.location() == "/":
		d.m.ended(target, res.answered, "a revoke")
	case res.code == http.StatusNotFound:
		// No index item: the session must be gone too (the index item is
		// written first and deleted last). Ended or not before, it must
		// let nothing through from now on.
		d.m.ended(target, res.answered, "a revoke that found no such session")
	case res.code == http.StatusServiceUnavailable:
		d.m.endUncertain(target)
	default:
		d.m.fail("revoke of %s from %s: %d %s; body: %.300s", target, d.sess, res.code, res.location(), res.body)
	}
}

// revokeForeign tries to revoke another user's session, which must not
// be found: and the session must live on, which the model checks when it
// is next used.
func (d *soakDevice) revokeForeign() {
	victim := d.m.foreign(d.user, d.rng.IntN)
	if victim == nil {
		d.me()
		return
	}
	d.m.mu.Lock()
	id := victim.id
	d.m.mu.Unlock()
	res, ok := d.revoke("revoke foreign", id)
	if ok && res.code != http.StatusNotFound && res.code != http.StatusServiceUnavailable {
		d.m.fail("%s revoked %s of another user: %d %s, want 404", d.sess, victim, res.code, res.location())
	}
}

// revokeUnknown tries to revoke an ID that was never issued.
func (d *soakDevice) revokeUnknown() {
	b := make([]byte, 16)
	rand.Read(b)
	res, ok := d.revoke("revoke unknown", hex.EncodeToString(b))
	if ok && res.code != http.StatusNotFound && res.code != http.StatusServiceUnavailable {
		d.m.fail("revoke of an unknown ID from %s: %d %s, want 404", d.sess, res.code, res.location())
	}
}

// forged sends GET /api/me with a credential that is no session's: a
// token never issued, with this user's key or none; garbage; or a real
// session's token paired with another user's key. None may get through.
func (d *soakDevice) forged() {
	own := d.sess.cred
	userPart := own[26:] // after the token: "", ".<user key>" or "~<sealed user key>"
	var cred string
	switch d.rng.IntN(4) {
	case 0:
		cred = rand.Text() + userPart
	case 1:
		cred = rand.Text()
	case 2:
		cred = "garbage-" + rand.Text()[:d.rng.IntN(20)]
	default:
		other, user := d.m.anyCred(d.sess, d.rng.IntN)
		token := rand.Text() // another session of this user: not a mismatch
		if other != "" && user != d.sess.user {
			token = other[:26]
		}
		cred = token + userPart
	}
	r, _ := http.NewRequest("GET", d.base+"/api/me", nil)
	r.Header.Set("User-Agent", "soak/forger")
	if d.bearer {
		r.Header.Set("Authorization", "Bearer "+cred)
	} else {
		r.Header.Set("Cookie", cookieName+"="+cred)
	}
	bare := *d.client
	bare.Jar = nil // the forged credential only
	res := d.doWith(&bare, "forged", r)
	if res.code != http.StatusUnauthorized && res.code != http.StatusServiceUnavailable {
		d.m.fail("GET /api/me with a forged credential: %d, want 401; body: %.300s", res.code, res.body)
	}
}

// logout logs the device out: its session ends, for sure if the answer is
// 303 and perhaps if it is 503; either way the client forgets it (a
// browser's cookie is cleared).
func (d *soakDevice) logout() {
	s := d.sess
	d.m.beginEnd(s)
	res := d.form("logout", "/logout", nil)
	switch {
	case res.code == http.StatusSeeOther && res.location() == "/":
		d.m.ended(s, res.answered, "a logout")
	case res.code == http.StatusServiceUnavailable:
		d.m.endUncertain(s)
	default:
		d.m.fail("logout of %s: %d; body: %.300s", s, res.code, res.body)
	}
	if !d.bearer && d.cookie() != "" {
		d.m.fail("logout of %s answered %d and left the cookie", s, res.code)
	}
	d.sess = nil
}
