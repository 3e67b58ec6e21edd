package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// The soak: soakUsers users, each with soakDevices devices (browsers and a
// command-line client with a bearer token), sign up, log in, browse the
// guarded pages, let refreshes come due, revoke each other's sessions, log
// out and in again, against the example's own handlers, for soakRounds
// rounds, while ddbtest's fault front below the SDK throttles, fails,
// loses answers and holds calls past their deadline at random
// (ddbtest.Soak, on its virtual clock). The clients' model
// (soak_model_test.go) checks every answer as it comes; after every round,
// with the faults off, the app must agree with it: every session that
// List shows is live (a request with it gets in) and every live session is
// listed (checkSoakRound). Every log line the process wrote, the app's at
// debug level included, is searched for every credential, password and
// token digest the run handed out (ddbtest.Soak). A long run, for the
// README's figures:
//
//	SOAK_ROUNDS=100 scripts/with-dynalite bash -c 'cd example && go test -race -count=1 -run Soak -v -timeout 30m .'
//
// SOAK_SEED repeats a run's fault draws: the same faults for the same
// requests of the same clients (the interleaving of the clients is the
// scheduler's).
const (
	soakUsers   = 8
	soakDevices = 3 // per user: two browsers, then a client with a bearer token
	// soakRounds are what the suite's time affords, under the race
	// detector; SOAK_ROUNDS runs more.
	soakRounds = 6
	// soakActions is how many requests a device makes in a round.
	soakActions = 6
	// soakRound is how far the app's clock moves on between rounds: a
	// session's refresh (RefreshInterval, a minute) comes due in each, a
	// re-authentication (-reauth, 10 minutes) grows old in the fourth
	// round after it, and IdleTimeout is never reached.
	soakRound           = 3 * time.Minute
	soakRefreshInterval = time.Minute
	soakIdleTimeout     = 7 * 24 * time.Hour
	// soakRetries bounds the tries of a call that must succeed in the
	// end: a device's first sign-in, which faults may refuse several
	// times.
	soakRetries = 20
	// soakHeapSlack is what the heap may grow by over the run: what the
	// runtime and the libraries keep on their own between two
	// measurements (sync.Pools, the HTTP stack's buffers). A leak of a few
	// KiB per request, or of a record per session, exceeds it.
	soakHeapSlack = 2 << 20
)

// TestSoak runs the soak (ddbtest.Soak): a warm-up of one user's devices
// making each kind of request once, which builds what the process builds
// once and keeps (the account page's User-Agent parser, the common-password
// set), and then the run; both leave the heap where they found it.
func TestSoak(t *testing.T) {
	if soakRounds*soakRound > soakIdleTimeout/2 {
		t.Fatalf("%d rounds of %v would pass half the IdleTimeout %v, and sessions would expire", soakRounds, soakRound, soakIdleTimeout)
	}
	ddbtest.Soak(t, ddbtest.SoakConfig{Rounds: soakRounds, HeapSlack: soakHeapSlack}, runSoak)
}

// soakApp is the example as the soak runs it.
type soakApp struct {
	app   *app
	web   *ddbtest.SoakApp
	watch *soakWatch
	run   *ddbtest.SoakRun
}

// runSoak runs one soak on a table and an app of its own, checks the app
// against the model after every round, shuts the app down and returns its
// figures.
func runSoak(s *ddbtest.SoakRun) string {
	t := s.T
	watch := newSoakWatch(s.LogHandler())
	users := soakUsers
	if s.Warmup {
		users = 1
	}
	cfg := appConfig{
		Client:          s.Client(),
		Table:           s.Table(),
		StoreTimeout:    2 * time.Second,
		IdleTimeout:     soakIdleTimeout,
		RefreshInterval: soakRefreshInterval,
		Now:             s.Now,
		Logger:          slog.New(watch),
		OnEvent:         watch.event,
		HashQueue:       8 * users * soakDevices, // no 503 for a full hashing queue
		HashCost:        testCost,
	}
	unlimited(&cfg) // the devices fail passwords on purpose, from few addresses
	a, err := newApp(context.Background(), cfg)
	if err != nil {
		t.Fatalf("newApp: %v", err)
	}
	sa := &soakApp{app: a, web: s.App(a, true), watch: watch, run: s}
	m := newSoakModel(t, s.Secrets)
	var devices []*soakDevice
	for i := range users {
		u := m.addUser("soak"+strconv.Itoa(i), "password of soak "+rand.Text())
		for j := range soakDevices {
			name := "browser" + strconv.Itoa(j)
			bearer := j == soakDevices-1
			if bearer {
				name = "cli"
			}
			devices = append(devices, newSoakDevice(m, sa, u, name, bearer, s.Rand(uint64(i*soakDevices+j)+1)))
		}
	}

	var checks soakChecks
	s.Play(len(devices), func(i, round int) {
		d := devices[i]
		if round == 0 {
			d.start(i%soakDevices == 0)
			return
		}
		for range soakActions {
			d.step()
		}
	}, func(round int) {
		checkSoakRound(m, sa, &checks)
		time.Sleep(soakRound) // the next round an app's minute later
	})
	sa.shutdown() // the refresh writes of the checks
	searched := searchHistories(s, cfg.Table)
	return fmt.Sprintf("  requests by kind: count, latency (virtual), answers by status\n%s  events: %s\n  warnings and errors logged: %s\n  %s\n  history: %d items searched for the run's secrets\n",
		m.figures(), watch.eventFigures(), watch.logFigures(), checks.summary(m), searched)
}

// searchHistories searches every security history item the run wrote in
// table for the run's secrets (every credential, password and digest the
// clients sent or were sent), as ddbtest.Soak searches the log, and
// returns how many it searched: none is a failure, since the search would
// then prove nothing.
func searchHistories(s *ddbtest.SoakRun, table string) int {
	t := s.T
	var lines []string
	pages := dynamodb.NewScanPaginator(s.EngineClient(), &dynamodb.ScanInput{
		TableName:                 &table,
		FilterExpression:          aws.String("#kind = :history"),
		ExpressionAttributeNames:  map[string]string{"#kind": "kind"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":history": &types.AttributeValueMemberS{Value: "session-history"}},
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatalf("scan the history items: %v", err)
		}
		for _, it := range page.Items {
			var attrs []string
			for name, v := range it {
				attrs = append(attrs, name+"="+attrString(v))
			}
			slices.Sort(attrs)
			lines = append(lines, strings.Join(attrs, " "))
		}
	}
	if len(lines) == 0 {
		t.Error("the run wrote no history item to search")
	}
	for _, h := range s.Secrets.Find(strings.Join(lines, "\n")) {
		t.Errorf("a history item holds %s: %s", h.What, h.Line)
	}
	return len(lines)
}

// attrString is an attribute's value as text, lists element by element.
func attrString(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberL:
		var parts []string
		for _, e := range v.Value {
			parts = append(parts, attrString(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprintf("%T", v)
}

// shutdown waits for the app's refresh writes, as its shutdown does.
func (sa *soakApp) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sa.app.shutdown(ctx); err != nil {
		sa.run.T.Errorf("refresh writes still running a minute after the round: %v", err)
	}
}

// soakChecks sums up what the rounds' checks found.
type soakChecks struct {
	rounds, probes, listed int
	// phantoms are List entries of sessions that are not live: a failed
	// sign-in's whose token no client has, or an ended session's. Each is
	// a failure. undone are those of a failed sign-in whose clean-up the
	// front itself failed, every attempt of it, and the library said so:
	// no library can delete what DynamoDB does not let it.
	phantoms, undone int
}

func (c *soakChecks) summary(m *soakModel) string {
	var handedOut, live, ended, uncertain int
	for _, u := range m.users {
		for _, s := range u.sessions {
			handedOut++
			switch {
			case s.refusedAt != 0 && s.endedAt != 0:
				ended++
			case s.refusedAt == 0:
				live++
			}
			if s.uncertain {
				uncertain++
			}
		}
	}
	return fmt.Sprintf("checks after each of %d rounds, faults off: %d probes of sessions, %d List entries; phantom List entries: %d "+
		"(and %d of failed sign-ins whose clean-up the front failed every attempt of)\n"+
		"  sessions at the end: %d handed out; %d live; %d ended (acknowledged, then refused); %d with an end answered 503",
		c.rounds, c.probes, c.listed, c.phantoms, c.undone, handedOut, live, ended, uncertain)
}

// checkSoakRound checks the app against the model with every device idle
// and the faults off, once the round's refresh writes are done:
//
//   - every session of the model that no answer has refused yet is asked
//     for with its own credential: let through, it must be live (model.let:
//     no end of it acknowledged); refused, some end of it must have been
//     sent (model.refused: no live session was lost);
//   - each user's List holds exactly the user's live sessions: an entry of
//     a session that is not live, or of a failed sign-in whose token no
//     client holds, is a phantom; the one exception is a failed sign-in
//     whose clean-up the library logged as failed and every attempt of
//     which the front failed before it reached the engine (counted apart);
//   - a live session that List lacks is missing.
func checkSoakRound(m *soakModel, sa *soakApp, c *soakChecks) {
	sa.shutdown()
	c.rounds++
	for _, u := range m.users {
		m.mu.Lock()
		probe := slices.DeleteFunc(slices.Clone(u.sessions), func(s *soakSession) bool { return s.refusedAt != 0 })
		m.mu.Unlock()
		live := map[*soakSession]bool{}
		for _, s := range probe {
			c.probes++
			res := sa.ask(m, s.cred, s.cookie)
			switch res.code {
			case http.StatusOK:
				m.let(s, res, "the round's check")
				live[s] = true
			case http.StatusUnauthorized:
				m.refused(s, res, "the round's check")
			default:
				m.fail("the round's check of %s, faults off: %d %.200s", s, res.code, res.body)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		list, err := sa.app.sessions.List(ctx, userKey(u.name))
		cancel()
		if err != nil {
			m.fail("the round's List of %s, faults off: %v", u.name, err)
			continue
		}
		listed := map[*soakSession]bool{}
		for _, e := range list {
			c.listed++
			m.mu.Lock()
			a := m.attempts[e.UserAgent]
			m.mu.Unlock()
			switch {
			case a == nil || a.user != u:
				c.phantoms++
				m.fail("%s's List shows %s (%q), which is none of the user's sign-ins", u.name, e.ID, e.UserAgent)
			case a.session != nil && live[a.session]:
				listed[a.session] = true
			case a.session != nil:
				c.phantoms++
				m.fail("%s's List shows %s as %s, which is not live (%s)%s", u.name, a.session, e.ID, a.session.endHow(), sa.deleteNote(a.session))
			case sa.watch.undoFailed(e.ID) && sa.undoFaulted(u, e.ID):
				c.undone++
			default:
				c.phantoms++
				m.fail("%s's List shows %s, of a %s answered %d (%q): a session whose token no client has%s",
					u.name, e.ID, a.kind, a.code, e.UserAgent, sa.undoNote(u, e.ID))
			}
		}
		for s := range live {
			if !listed[s] {
				m.fail("%s's List misses %s, which is live%s", u.name, s, sa.indexNote(s))
			}
		}
	}
}

// undoFaulted reports whether the front failed every attempt of the
// clean-up of session id's index item, before it reached the engine.
func (sa *soakApp) undoFaulted(u *soakUser, id string) bool {
	attempts, applied := sa.run.Faults.KeyAttempts("DeleteItem", "sk=S#"+id)
	return attempts > 0 && applied == 0
}

// undoNote says what became of the clean-up of session id's index item.
func (sa *soakApp) undoNote(u *soakUser, id string) string {
	attempts, applied := sa.run.Faults.KeyAttempts("DeleteItem", "sk=S#"+id)
	return fmt.Sprintf("; its index item's DeleteItems: %d attempts, %d of them reached the engine; a failed undo logged: %v", attempts, applied, sa.watch.undoFailed(id))
}

// indexNote says what became of the index item of s, a live session that
// List does not show: its ID, from its session item, and the DeleteItems
// of its index item.
func (sa *soakApp) indexNote(s *soakSession) string {
	token := s.cred[:26]
	sum := sha256.Sum256([]byte(token))
	pk := "SESSION#" + base64.RawURLEncoding.EncodeToString(sum[:])
	out, err := sa.run.EngineClient().Query(context.Background(), &dynamodb.QueryInput{
		TableName:                 &sa.app.users.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: pk}},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil || len(out.Items) == 0 {
		return fmt.Sprintf("; its session item: %v, %v", err, out)
	}
	id, _ := out.Items[0]["sid"].(*types.AttributeValueMemberS)
	if id == nil {
		return "; its session item has no sid"
	}
	attempts, applied := sa.run.Faults.KeyAttempts("DeleteItem", "sk=S#"+id.Value)
	return fmt.Sprintf("; its ID is %s, and DeleteItems of its index item: %d attempts, %d of them reached the engine", id.Value, attempts, applied)
}

// deleteNote says what the front did with the DeleteItems of s's session
// item.
func (sa *soakApp) deleteNote(s *soakSession) string {
	token := s.cred[:26]
	sum := sha256.Sum256([]byte(token))
	attempts, applied := sa.run.Faults.KeyAttempts("DeleteItem", "SESSION#"+base64.RawURLEncoding.EncodeToString(sum[:]))
	return fmt.Sprintf("; its session item's DeleteItems: %d attempts, %d of them reached the engine", attempts, applied)
}

// ask sends GET /api/me with cred, as a cookie or a bearer token, from a
// client of its own, and returns the answer, ordered in m's sequence.
func (sa *soakApp) ask(m *soakModel, cred string, cookie bool) soakResponse {
	r, err := http.NewRequest("GET", sa.web.URL+"/api/me", nil)
	if err != nil {
		panic(err)
	}
	r.Header.Set("User-Agent", "soak/check")
	if cookie {
		r.Header.Set("Cookie", cookieName+"="+cred)
	} else {
		r.Header.Set("Authorization", "Bearer "+cred)
	}
	out := soakResponse{sent: m.seq.Add(1)}
	res, err := sa.web.Client(false).Do(r)
	if err != nil {
		out.body = err.Error()
	} else {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		out.code, out.header, out.body = res.StatusCode, res.Header, string(b)
	}
	out.answered = m.seq.Add(1)
	return out
}

// soakWatch is the app's log handler: it passes every record on to the
// soak's captured log, counts the warnings and errors by message (and
// operation), and keeps the session IDs of the failed clean-ups that the
// library says may leave an index item behind.
type soakWatch struct {
	*soakWatchState
	next slog.Handler
}

type soakWatchState struct {
	mu     sync.Mutex
	logs   map[string]int
	events map[ddbsession.EventKind]int
	undo   map[string]bool // IDs whose index item's undo failed after a failed Login
}

func newSoakWatch(next slog.Handler) *soakWatch {
	return &soakWatch{next: next, soakWatchState: &soakWatchState{logs: map[string]int{}, events: map[ddbsession.EventKind]int{}, undo: map[string]bool{}}}
}

func (w *soakWatch) Enabled(context.Context, slog.Level) bool { return true }

func (w *soakWatch) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var sid, op string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "sid":
				sid = a.Value.String()
			case "op":
				op = a.Value.String()
			}
			return true
		})
		key := r.Message
		if op != "" {
			key += " (" + op + ")"
		}
		w.mu.Lock()
		w.logs[key]++
		if r.Message == "ddbsession: undo session index item" {
			w.undo[sid] = true
		}
		w.mu.Unlock()
	}
	return w.next.Handle(ctx, r)
}

func (w *soakWatch) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &soakWatch{soakWatchState: w.soakWatchState, next: w.next.WithAttrs(attrs)}
}

func (w *soakWatch) WithGroup(name string) slog.Handler {
	return &soakWatch{soakWatchState: w.soakWatchState, next: w.next.WithGroup(name)}
}

func (w *soakWatch) event(_ context.Context, e ddbsession.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events[e.Kind]++
}

func (w *soakWatch) undoFailed(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.undo[id]
}

func (w *soakWatch) eventFigures() string { return countsText(&w.mu, w.events) }
func (w *soakWatch) logFigures() string   { return countsText(&w.mu, w.logs) }

func countsText[K ~string](mu *sync.Mutex, counts map[K]int) string {
	mu.Lock()
	defer mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// endHow says what ended s, as far as the clients know.
func (s *soakSession) endHow() string {
	switch {
	case s.endedAt != 0:
		return "its end by " + s.endedBy + " was acknowledged at " + strconv.FormatInt(s.endedAt, 10)
	case s.refusedAt != 0:
		return "it was refused at " + strconv.FormatInt(s.refusedAt, 10)
	case s.uncertain:
		return "an end of it was answered 503"
	}
	return "nothing tried to end it"
}
