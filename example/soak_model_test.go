package main

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// soakModel is what the soak's clients know: every sign-in they attempted
// and how it was answered, and of every session they were given, what they
// did to end it and what the app said. It checks each answer against that
// as it comes, and holds what the checks after each round (checkSoakRound)
// compare the app with.
//
// Order comes from seq, a counter that a client reads before it sends a
// request and again once the answer is in: a request sent after an answer
// has a higher sent than that answer's answered, so "sent after the end was
// acknowledged" is a comparison of two numbers, whatever the machine's
// speed.
type soakModel struct {
	t       *testing.T
	seq     atomic.Int64
	secrets *ddbtest.Secrets // what no log line may hold

	mu       sync.Mutex
	users    []*soakUser
	attempts map[string]*soakAttempt // by User-Agent: each sign-in has its own
	failures int
	stats    map[string]*soakKindStats
}

// soakUser is one account, with the sessions its devices were given.
type soakUser struct {
	name, password string
	ready          chan struct{} // closed once the account exists
	sessions       []*soakSession
}

// soakAttempt is one sign-in (a sign-up, a login, an API login, a login of
// a signed-in client), known by the User-Agent it alone sent, which List
// shows with the session it made, if any.
type soakAttempt struct {
	user    *soakUser
	ua      string
	kind    string
	code    int          // its answer's status, 0 until answered
	session *soakSession // the session it handed out, if it did
}

// soakSession is a session a client was given, and what became of it.
type soakSession struct {
	attempt *soakAttempt
	user    *soakUser
	cred    string // the cookie's value, or the bearer token
	cookie  bool   // sent in the cookie (a browser's) or as a bearer token
	id      string // its public ID, once a List showed it
	issued  int64  // seq when the sign-in's answer arrived
	// ends counts the requests sent to end it: logouts, revokes and
	// logins that rotate it. While it is 0 the session must live.
	ends int
	// endedAt is the answered seq of the first acknowledged end (endedBy
	// says which), refusedAt that of the first 401: no request sent
	// after either may get through.
	endedAt, refusedAt int64
	endedBy            string
	uncertain          bool // an end was answered 503: it may or may not have happened
}

// soakKindStats counts one kind of request's answers by status, with
// their latencies.
type soakKindStats struct {
	codes     map[int]int
	latencies []time.Duration
}

func newSoakModel(t *testing.T, secrets *ddbtest.Secrets) *soakModel {
	return &soakModel{t: t, secrets: secrets, attempts: map[string]*soakAttempt{}, stats: map[string]*soakKindStats{}}
}

// maxReported bounds the violations reported one by one.
const maxReported = 40

// fail reports a violation: the test fails, and the first maxReported are
// told in full. It is safe from any goroutine.
func (m *soakModel) fail(format string, args ...any) {
	m.mu.Lock()
	m.failures++
	n := m.failures
	m.mu.Unlock()
	if n <= maxReported {
		m.t.Errorf("soak: "+format, args...)
	}
}

// record counts an answer of kind.
func (m *soakModel) record(kind string, code int, took time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.stats[kind]
	if st == nil {
		st = &soakKindStats{codes: map[int]int{}}
		m.stats[kind] = st
	}
	st.codes[code]++
	st.latencies = append(st.latencies, took)
}

func (m *soakModel) addUser(name, password string) *soakUser {
	m.secrets.Add("a user's password", password)
	m.secrets.Add("a wrong password", "not "+password)
	m.mu.Lock()
	defer m.mu.Unlock()
	u := &soakUser{name: name, password: password, ready: make(chan struct{})}
	m.users = append(m.users, u)
	return u
}

// attempt registers a sign-in about to be sent with User-Agent ua.
func (m *soakModel) attempt(u *soakUser, ua, kind string) *soakAttempt {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := &soakAttempt{user: u, ua: ua, kind: kind}
	m.attempts[ua] = a
	return a
}

// answered notes a sign-in's answer, and the session it handed out if
// cred is not "".
func (m *soakModel) answered(a *soakAttempt, res soakResponse, cred string, cookie bool) *soakSession {
	m.mu.Lock()
	defer m.mu.Unlock()
	a.code = res.code
	if cred == "" {
		return nil
	}
	s := &soakSession{attempt: a, user: a.user, cred: cred, cookie: cookie, issued: res.answered}
	a.session = s
	a.user.sessions = append(a.user.sessions, s)
	return s
}

// beginEnd notes that a request to end s is about to be sent.
func (m *soakModel) beginEnd(s *soakSession) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.ends++
}

// abandonEnd takes back beginEnd for a request that was refused before
// it could end anything.
func (m *soakModel) abandonEnd(s *soakSession) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.ends--
}

// ended notes that an end of s was acknowledged by the answer at seq.
func (m *soakModel) ended(s *soakSession, answered int64, by string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.endedAt == 0 {
		s.endedAt, s.endedBy = answered, by
	}
}

// endUncertain notes that an end of s was answered 503.
func (m *soakModel) endUncertain(s *soakSession) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.uncertain = true
}

// let checks an answer that let a request with s through (a guarded
// 200): no end of s, and no refusal of it, was answered before the
// request was sent.
func (m *soakModel) let(s *soakSession, res soakResponse, what string) {
	m.mu.Lock()
	endedAt, endedBy, refusedAt := s.endedAt, s.endedBy, s.refusedAt
	m.mu.Unlock()
	if endedAt != 0 && res.sent > endedAt {
		m.fail("%s: 200 for %s, whose end (%s) was acknowledged before the request was sent", what, s, endedBy)
	}
	if refusedAt != 0 && res.sent > refusedAt {
		m.fail("%s: 200 for %s, which was refused (401) before the request was sent", what, s)
	}
}

// refused checks an answer that refused s (a guarded 401): some end of s
// must have been sent before, or a session that should live was lost.
func (m *soakModel) refused(s *soakSession, res soakResponse, what string) {
	m.mu.Lock()
	ends := s.ends
	if s.refusedAt == 0 {
		s.refusedAt = res.answered
	}
	m.mu.Unlock()
	if ends == 0 {
		m.fail("%s: %d for %s, which no request has tried to end: a live session was lost", what, res.code, s)
	}
}

// listed checks a List that s's request got, sent at sent: every entry is
// one of the user's own sign-ins, s is the current one, and every session
// of the user that was handed out before sent and that nothing has tried
// to end is there. It learns the entries' IDs.
func (m *soakModel) listed(s *soakSession, list []sessionJSON, sent int64, what string) {
	var problems []string
	defer func() { m.report(problems) }() // after the unlock
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*soakSession]bool{}
	current := 0
	for _, e := range list {
		a := m.attempts[e.UserAgent]
		switch {
		case a == nil || a.user != s.user:
			problems = append(problems, fmt.Sprintf("%s for %s: entry %s (%q) is none of %s's sign-ins", what, s, e.ID, e.UserAgent, s.user.name))
			continue
		case a.session == nil:
			continue // a sign-in that failed, or is not answered yet; checkSoakRound looks at it
		}
		seen[a.session] = true
		if p := m.learnID(a.session, e.ID); p != "" {
			problems = append(problems, what+": "+p)
		}
		if e.Current {
			current++
			if a.session != s {
				problems = append(problems, fmt.Sprintf("%s for %s: the current entry is %s", what, s, a.session))
			}
		}
	}
	// The request's own session is current, unless an end of it (a
	// revoke from another device) raced the List.
	if current > 1 || (current == 0 && s.ends == 0) {
		problems = append(problems, fmt.Sprintf("%s for %s: %d current entries, want 1", what, s, current))
	}
	for _, other := range s.user.sessions {
		if other.issued < sent && other.ends == 0 && !seen[other] {
			problems = append(problems, fmt.Sprintf("%s for %s: %s is missing, which no request has tried to end", what, s, other))
		}
	}
}

// learnID notes s's public ID, which must never change, and returns a
// problem if it did. m.mu is held.
func (m *soakModel) learnID(s *soakSession, id string) string {
	switch {
	case s.id == "":
		s.id = id
	case s.id != id:
		return fmt.Sprintf("%s shows as %s, seen before as %s", s, id, s.id)
	}
	return ""
}

// report fails with each problem. m.mu must not be held.
func (m *soakModel) report(problems []string) {
	for _, p := range problems {
		m.fail("%s", p)
	}
}

// target picks a session of u, other than own, that a List has shown and
// that no end has been acknowledged for: one to revoke. It returns nil if
// there is none.
func (m *soakModel) target(u *soakUser, own *soakSession, pick func(n int) int) *soakSession {
	m.mu.Lock()
	defer m.mu.Unlock()
	var candidates []*soakSession
	for _, s := range u.sessions {
		if s != own && s.id != "" && s.endedAt == 0 && s.refusedAt == 0 {
			candidates = append(candidates, s)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	return candidates[pick(len(candidates))]
}

// foreign picks a listed session of a user other than u that should be
// live: one to try to revoke as u.
func (m *soakModel) foreign(u *soakUser, pick func(n int) int) *soakSession {
	m.mu.Lock()
	defer m.mu.Unlock()
	var candidates []*soakSession
	for _, other := range m.users {
		if other == u {
			continue
		}
		for _, s := range other.sessions {
			if s.id != "" && s.ends == 0 {
				candidates = append(candidates, s)
			}
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	return candidates[pick(len(candidates))]
}

// anyCred returns the credential of some session other than own, of any
// user, and its user, for forged credentials.
func (m *soakModel) anyCred(own *soakSession, pick func(n int) int) (string, *soakUser) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for range 4 {
		u := m.users[pick(len(m.users))]
		if len(u.sessions) > 0 {
			if s := u.sessions[pick(len(u.sessions))]; s != own {
				return s.cred, u
			}
		}
	}
	return "", nil
}

// String names s by what never changes, so that any goroutine may print
// it.
func (s *soakSession) String() string {
	kind := "bearer token"
	if s.cookie {
		kind = "cookie"
	}
	return fmt.Sprintf("the session of %q (%s's, %s, from a %s answered at %d)", s.attempt.ua, s.user.name, kind, s.attempt.kind, s.issued)
}

// soakResponse is one answer, with seq before the request and after the
// answer.
type soakResponse struct {
	code           int
	body           string
	header         http.Header
	sent, answered int64
}

// location is a redirect's target path.
func (r soakResponse) location() string { return r.header.Get("Location") }

// toLogin says whether the answer sends a browser to log in: a page's
// answer to a request without a valid session.
func (r soakResponse) toLogin() bool {
	return r.code == http.StatusSeeOther && strings.HasPrefix(r.location(), "/login")
}

// stepUp says whether the answer asks for a recent authentication: a
// browser sent to the re-authentication page, an API client's 401 with
// RFC 9470's challenge. It is no refusal of the session.
func (r soakResponse) stepUp() bool {
	path, _, _ := strings.Cut(r.location(), "?") // ?next= where the request was a GET
	return r.code == http.StatusSeeOther && path == reauthPath ||
		r.code == http.StatusUnauthorized && strings.Contains(r.header.Get("WWW-Authenticate"), `error="insufficient_user_authentication"`)
}

// figures sums the answers up, by kind and status, with p50 and p99
// latencies.
func (m *soakModel) figures() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	total := 0
	for _, kind := range slices.Sorted(maps.Keys(m.stats)) {
		st := m.stats[kind]
		n := len(st.latencies)
		total += n
		slices.Sort(st.latencies)
		p := func(q float64) time.Duration {
			return st.latencies[min(n-1, int(q*float64(n)))].Round(time.Millisecond)
		}
		var codes []string
		for _, code := range slices.Sorted(maps.Keys(st.codes)) {
			codes = append(codes, fmt.Sprintf("%d: %d", code, st.codes[code]))
		}
		fmt.Fprintf(&b, "  %-16s %6d  p50 %6v  p99 %6v  (%s)\n", kind, n, p(0.5), p(0.99), strings.Join(codes, ", "))
	}
	fmt.Fprintf(&b, "  %-16s %6d\n", "all", total)
	return b.String()
}
