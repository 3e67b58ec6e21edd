package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/internal/item"
)

// No command prints a secret: users sign in through the library, with
// cookies, bearer tokens and a pending two-step login, and every command
// that reads or writes sessions runs on their table, with -json, piped and
// on a terminal (progress, questions), in one Region and in MREC. Nothing
// it writes to stdout or stderr, nor what the app's Manager and slog's
// default logger log meanwhile, holds a token, its SHA-256 digest (which
// the session items' keys hold) or half of either; what it writes does
// hold the public session IDs, and the same search finds a token planted
// in a scratch line.
//
// Not parallel: it captures slog's default logger, which is the process's.
func TestNoSecretInCLIOutput(t *testing.T) {
	defaultLog := captureDefaultLog(t)
	for _, tc := range []struct {
		name string
		mrec bool
	}{
		{"one Region", false},
		{"MREC", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noSecretInCLIOutput(t, tc.mrec, defaultLog)
		})
	}
}

func noSecretInCLIOutput(t *testing.T, mrec bool, defaultLog *lockedBuffer) {
	appLog := &lockedBuffer{}
	var cfg ddbsession.Config[testUser]
	f := newFixture(t, func(c *ddbsession.Config[testUser]) {
		c.Layout.MREC = mrec
		c.Layout.ExpiryIndex = "expiry"
		c.Limits.IdleTimeout = time.Hour
		c.BearerTokens = true
		c.Logger = slog.New(slog.NewTextHandler(appLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
		cfg = *c
	})
	ctx := context.Background()
	l, err := item.Layout(f.layout).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}

	// Every credential issued, and its token.
	secrets := &ddbtest.Secrets{}
	var tokens []string
	issue := func(what, credential string) {
		t.Helper()
		c, ok := l.ParseCredential(credential)
		if !ok {
			t.Fatalf("%s %q is no credential", what, credential)
		}
		secrets.Add(what, credential)
		tokens = append(tokens, c.Token)
	}
	type client struct {
		name, credential string
		cookie           string // the cookie's name; "" for a bearer token
	}
	var clients []client
	cookie := func(user ddbsession.UserKey, agent string, methods ...string) {
		t.Helper()
		c := f.login(user, agent, methods...)
		issue("the session cookie of "+user.PK, c.Value)
		clients = append(clients, client{"the cookie of " + user.PK, c.Value, c.Name})
	}
	bearer := func(user ddbsession.UserKey, methods ...string) {
		t.Helper()
		r := httptest.NewRequest("POST", "https://app.test/api/login", nil)
		r.Header.Set("User-Agent", curl)
		token, _, err := f.app.LoginBearer(r, user, nil, methods...)
		if err != nil {
			t.Fatalf("LoginBearer: %v", err)
		}
		issue("the bearer token of "+user.PK, token)
		clients = append(clients, client{"the bearer token of " + user.PK, token, ""})
	}
	alice, bob, carol, dave := f.user("alice"), f.user("bob"), f.user("carol"), f.user("dave")
	cookie(alice, firefox, "password", "otp")
	cookie(alice, curl)
	bearer(alice, "password")
	cookie(bob, firefox, "passkey")
	bearer(bob)
	bearer(bob, "password", "otp")
	for range 3 { // one for each form of sessions revoke
		cookie(carol, firefox, "password")
	}
	// dave's first step, and a wrong second factor: a pending session item
	// and a try's record, both under the digest of the pending cookie.
	pending := f.beginLogin(dave)
	issue("the pending cookie of "+dave.PK, pending.Value)
	f.failSecondFactor(pending)
	// A session of alice in a format this release cannot read, which the
	// library logs a warning of when it reads it: through the command's
	// logger.
	unknown := item.NewToken()
	issue("the token of alice's session in an unknown format", unknown)
	now := time.Now().Truncate(time.Millisecond)
	odd := item.Session{
		ID: item.NewID(now), UserPK: alice.PK, UserSK: alice.SK, CreatedAt: now, RefreshedAt: now, AuthAt: now,
		ExpiresAt: time.Unix(now.Add(time.Hour).Unix(), 0), UserAgent: "a release from the future",
	}
	oddSession := l.EncodeSession(l.SessionPK(unknown), odd)
	oddSession[item.AttrVersion] = item.Num(item.FormatDPoP + 1)
	f.put(oddSession)
	f.put(l.EncodeIndex(l.SessionPK(unknown), odd))

	// The app serves each client, and logs what it does in the app's log.
	serve := func(app *ddbsession.Manager[testUser], step string, want int) {
		t.Helper()
		h := app.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		for _, c := range clients {
			r := httptest.NewRequest("GET", "https://app.test/account", nil)
			if c.cookie == "" {
				r.Header.Set("Authorization", "Bearer "+c.credential)
			} else {
				r.AddCookie(&http.Cookie{Name: c.cookie, Value: c.credential})
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != want {
				t.Fatalf("%s: %s answered %d, want %d", step, c.name, w.Code, want)
			}
		}
		if err := app.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	serve(f.app, "signed in", http.StatusOK)

	// The test knows every digest the table holds, and the table holds
	// each token's.
	held := f.digests()
	for d := range held {
		if len(secrets.Find(d)) == 0 {
			t.Errorf("the table holds %q, which is no digest of a token the test issued", d)
		}
	}
	for _, token := range tokens {
		if !held[digest(token)] {
			t.Errorf("the table holds no digest of a token issued")
		}
	}

	// The public IDs that a devices page shows.
	var ids []string
	for _, u := range []ddbsession.UserKey{alice, bob, carol} {
		list, err := f.app.List(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) != len(clients) {
		t.Fatalf("List shows %d sessions of alice, bob and carol, want %d", len(ids), len(clients))
	}
	carols, err := f.app.List(ctx, carol)
	if err != nil || len(carols) != 3 {
		t.Fatalf("carol's sessions: %v, %v", carols, err)
	}

	// Every command, in every form.
	forms := []struct {
		name           string
		json, terminal bool
	}{{"-json", true, false}, {"piped", false, false}, {"on a terminal", false, true}}
	var output strings.Builder
	run := func(form int, want int, args ...string) (stdout, stderr string) {
		t.Helper()
		fm := forms[form]
		if fm.json {
			args = append(args, "-json")
		}
		if mrec {
			args = append(args, "-mrec")
		}
		args = append(args, "-expiry-index", "expiry")
		f.terminal = fm.terminal
		code, stdout, stderr := f.run(args...)
		f.terminal, f.stdin = false, ""
		wantCode(t, code, want, stdout, stderr)
		fmt.Fprintf(&output, "$ ddbsession %s (%s)\n%s%s", strings.Join(args, " "), fm.name, stdout, stderr)
		return stdout, stderr
	}
	user := func(u ddbsession.UserKey) []string { return []string{u.PK, "-sk", u.SK} }
	// On an engine without TTL (dynalite) the table fits with TTL off,
	// which check reports in its exit code and create in its output.
	checkCode := exitTTL
	if engineHasTTL(t) {
		checkCode = exitOK
	}
	var listed, histories strings.Builder // what sessions list and history wrote
	for form := range forms {
		run(form, checkCode, "table", "check")
		run(form, exitOK, "table", "create")
		for _, u := range []ddbsession.UserKey{alice, bob, carol, dave} {
			stdout, stderr := run(form, exitOK, append([]string{"sessions", "list"}, user(u)...)...)
			listed.WriteString(stdout + stderr)
		}
		run(form, exitNotFound, "sessions", "list", "USER#nobody", "-sk", "PROFILE")
		run(form, exitOK, "sessions", "expiring", "-within", "2h")
		if forms[form].terminal {
			f.stdin = "y\n"
			run(form, exitOK, "count")
		} else {
			run(form, exitOK, "count", "-yes")
		}
	}
	if !strings.Contains(listed.String(), "ignoring a session item in an unknown format") {
		t.Errorf("sessions list did not pass on the library's warning of the unknown session item:\n%s", listed.String())
	}
	for _, id := range ids {
		if !strings.Contains(listed.String(), id) {
			t.Errorf("sessions list never showed session %s: the search ran over output without the IDs\n%s", id, listed.String())
		}
	}
	for form := range forms {
		run(form, exitOK, append([]string{"sessions", "revoke"}, append(user(carol), carols[form].ID)...)...)
		run(form, exitNotFound, append([]string{"sessions", "revoke"}, append(user(carol), item.NewID(now))...)...)
		run(form, exitOK, append([]string{"sessions", "revoke-all"}, user(bob)...)...)
		run(form, exitNotFound, "sessions", "revoke-all", "USER#nobody", "-sk", "PROFILE")
		if forms[form].terminal {
			f.stdin = f.table + "\n"
			run(form, exitOK, "sessions", "revoke-everyone")
		} else {
			run(form, exitOK, "sessions", "revoke-everyone", "-yes")
		}
		run(form, exitOK, "sessions", "list", alice.PK, "-sk", alice.SK)
		run(form, exitOK, "count", "-yes")
		// The histories, which the revocations above wrote into, with the
		// sign-ins: the search runs over each event's device and address.
		for _, u := range []ddbsession.UserKey{alice, bob, carol} {
			stdout, stderr := run(form, exitOK, append([]string{"history"}, user(u)...)...)
			histories.WriteString(stdout + stderr)
		}
	}
	for _, want := range []string{"created", "revoked-all", "revoked", "revoked-everyone"} {
		if !strings.Contains(histories.String(), want) {
			t.Errorf("history never showed a %s event: the search ran over output without it\n%s", want, histories.String())
		}
	}
	// Another instance of the app, which reads the global generation
	// afresh: the first applies revoke-everyone only within
	// RevokeEveryoneWithin.
	fresh, err := ddbsession.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	serve(fresh, "revoked", http.StatusUnauthorized)
	// Everything has expired by the sweep's clock: each form deletes what
	// it finds of the sessions, index items, end records and tries.
	f.clock = newSleeper(time.Now().Add(400 * 24 * time.Hour))
	for form := range forms {
		run(form, exitOK, "sweep", "-dry-run", "-max-wcu", "0", "-max-rcu", "0")
	}
	swept, _ := run(0, exitOK, "sweep", "-max-wcu", "0", "-max-rcu", "0")
	var report sweepReport
	decode(t, swept, &report)
	if report.Deleted == 0 {
		t.Errorf("the sweep deleted nothing: %+v", report)
	}
	for form := 1; form < len(forms); form++ {
		run(form, exitOK, "sweep", "-max-wcu", "0", "-max-rcu", "0")
	}
	f.clock = nil
	if err := f.app.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	// The search.
	search := map[string]string{
		"the command's output":    output.String(),
		"the app's log":           appLog.String(),
		"slog's default logger's": defaultLog.String(),
	}
	for where, text := range search {
		for _, hit := range secrets.Find(text) {
			t.Errorf("%s holds %s, on the line:\n%s", where, hit.What, hit.Line)
		}
		for _, half := range halvesIn(text, tokens) {
			t.Errorf("%s holds half of a token or of its digest, %q", where, half)
		}
	}
	if !strings.Contains(appLog.String(), "level=") {
		t.Errorf("the app logged nothing: the capture of its log is broken")
	}

	// The search finds what it looks for: a token planted in a line of
	// the output, the session key of one, and half of one.
	for _, plant := range []struct{ what, line string }{
		{"a credential", "stderr: warning: cookie=" + clients[0].credential},
		{"a session key", "ddbsession sweep: delete " + l.SessionPK(tokens[1]) + " failed"},
	} {
		scratch := output.String() + plant.line + "\n"
		if hits := secrets.Find(scratch); len(hits) == 0 || hits[0].Line != plant.line {
			t.Errorf("the search misses %s planted in the output: %+v", plant.what, hits)
		}
	}
	for _, half := range []string{tokens[2][:13], digest(tokens[3])[21:]} {
		if len(halvesIn(output.String()+"id="+half+"\n", tokens)) == 0 {
			t.Errorf("the search misses half of a token or digest, %q, planted in the output", half)
		}
	}
}

// digestRun is a run of base64url characters; a digest is one of 43, the
// unpadded encoding of 32 bytes.
var digestRun = regexp.MustCompile(`[A-Za-z0-9_-]+`)

// digests is every run of 43 base64url characters in any String of any
// item of the table, keys included: each a SHA-256 digest.
func (f *fixture) digests() map[string]bool {
	f.t.Helper()
	found := map[string]bool{}
	var walk func(av types.AttributeValue)
	walk = func(av types.AttributeValue) {
		switch v := av.(type) {
		case *types.AttributeValueMemberS:
			for _, run := range digestRun.FindAllString(v.Value, -1) {
				if len(run) == 43 {
					found[run] = true
				}
			}
		case *types.AttributeValueMemberSS:
			for _, s := range v.Value {
				walk(&types.AttributeValueMemberS{Value: s})
			}
		case *types.AttributeValueMemberL:
			for _, e := range v.Value {
				walk(e)
			}
		case *types.AttributeValueMemberM:
			for _, e := range v.Value {
				walk(e)
			}
		}
	}
	pages := dynamodb.NewScanPaginator(f.engine, &dynamodb.ScanInput{TableName: &f.table, ConsistentRead: aws.Bool(true)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(context.Background())
		if err != nil {
			f.t.Fatalf("Scan: %v", err)
		}
		for _, av := range page.Items {
			for _, v := range av {
				walk(v)
			}
		}
	}
	return found
}

// digest is how the table holds token: base64url(SHA-256(token)).
func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// halvesIn returns the halves that text holds of the tokens and of their
// digests, in each encoding: the first and the second half of each, for a
// cut-off secret is still one. (Secrets.Find looks for whole ones.)
func halvesIn(text string, tokens []string) []string {
	var found []string
	for _, token := range tokens {
		sum := sha256.Sum256([]byte(token))
		for _, s := range []string{token, base64.RawURLEncoding.EncodeToString(sum[:]), base64.RawStdEncoding.EncodeToString(sum[:]), hex.EncodeToString(sum[:])} {
			for _, half := range []string{s[:len(s)/2], s[len(s)/2:]} {
				// A digest without "-" or "_" is the same in base64url
				// and base64: one hit.
				if strings.Contains(text, half) && !slices.Contains(found, half) {
					found = append(found, half)
				}
			}
		}
	}
	return found
}

// captureDefaultLog makes slog's default logger, and with it the log
// package's, write into the buffer it returns, at debug level, until t ends.
func captureDefaultLog(t *testing.T) *lockedBuffer {
	t.Helper()
	buf := &lockedBuffer{}
	oldDefault, oldOutput, oldFlags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() {
		slog.SetDefault(oldDefault)
		log.SetOutput(oldOutput) // which SetDefault of a handler of ours changed
		log.SetFlags(oldFlags)
	})
	return buf
}

// lockedBuffer is a buffer that loggers on several goroutines write to.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// import prints nothing a session holds: not a token, its digest (the
// item's key) or half of either, nor a byte of the data, in any form
// (-json, piped, on a terminal with its progress bar), with malformed
// keys, sessions already there, and a run that DynamoDB fails half-way.
func TestNoSecretInImportOutput(t *testing.T) {
	f := newFixture(t)
	old := newOldStore(t)
	expires := time.Now().Add(time.Hour)
	old.add("scs:session:", 40, expires)
	old.addMalformed("scs:session:", expires)
	secrets := &ddbtest.Secrets{}
	var tokens []string
	for token, s := range old.sessions {
		secrets.Add("the scs token of a session in Redis", token)
		tokens = append(tokens, token)
		// The data, as the user name and the cart's item it holds are
		// too short to be secrets alone: the encoding's tail.
		secrets.Add("the data of a session in Redis", string(s.data[len(s.data)-20:]))
	}
	var output strings.Builder
	run := func(name string, want int, terminal bool, args ...string) {
		t.Helper()
		f.terminal = terminal
		code, stdout, stderr := f.run(append([]string{"import", "-redis", old.addr, "-max-wcu", "0"}, args...)...)
		f.terminal = false
		wantCode(t, code, want, stdout, stderr)
		fmt.Fprintf(&output, "$ ddbsession import %s (%s)\n%s%s", strings.Join(args, " "), name, stdout, stderr)
	}
	// DynamoDB fails the tenth put: the run stops, and says where.
	var puts atomic.Int32
	f.probe.Fail = func(_ context.Context, op string, _ any) error {
		if op == "PutItem" && puts.Add(1) == 10 {
			return errors.New("an outage")
		}
		return nil
	}
	run("failing", exitFailure, false, "-state", filepath.Join(t.TempDir(), "import.state"))
	f.probe.Fail = nil
	// A state that a run killed after its first batch of ten left.
	cursor, _, err := old.conn.scan("0", "scs:session:*", 10)
	if err != nil || cursor == "0" {
		t.Fatalf("SCAN: cursor %q, %v", cursor, err)
	}
	state := filepath.Join(t.TempDir(), "import.state")
	if err := saveImportState(state, importState{Redis: "redis://" + old.addr + "/0", Prefix: "scs:session:", Table: f.table, Cursor: cursor}); err != nil {
		t.Fatal(err)
	}
	run("piped, resumed", exitOK, false, "-state", state)
	run("-json", exitOK, false, "-state", filepath.Join(t.TempDir(), "import.state"), "-json")
	run("on a terminal", exitOK, true, "-state", filepath.Join(t.TempDir(), "import.state"))
	run("done", exitOK, false, "-state", state)
	for _, says := range []string{"an outage", "resuming where", "import [", "complete already", "already in the table"} {
		if !strings.Contains(output.String(), says) {
			t.Errorf("the output does not say %q: the runs did not take the paths meant\n%s", says, output.String())
		}
	}
	text := output.String()
	for _, hit := range secrets.Find(text) {
		t.Errorf("the output holds %s, on the line:\n%s", hit.What, hit.Line)
	}
	for _, half := range halvesIn(text, tokens) {
		t.Errorf("the output holds half of a token or of its digest, %q", half)
	}
	// The search finds what it looks for.
	l := item.SCSLayout{Layout: mustItems(t, f), Prefix: item.DefaultSCSPrefix}
	for _, plant := range []string{"key " + tokens[0], "wrote " + l.PK(tokens[1]), "data " + string(old.sessions[tokens[2]].data)} {
		if len(secrets.Find(text+plant+"\n")) == 0 {
			t.Errorf("the search misses %q planted in the output", plant)
		}
	}
}
