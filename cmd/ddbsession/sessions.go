package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/item"
)

// This file is "sessions": a user's devices page, and the three ways to
// end sessions.

const userHelp = `USER is the user item's partition key (UserKey.PK), and -sk its sort key
(UserKey.SK), which a table with a sort key needs: USER#alice -sk PROFILE.
Put "--" before a USER that starts with "-".`

var sessionsListCommand = &command{
	path:    "sessions list",
	args:    []string{"USER"},
	summary: "a user's live sessions: the devices page",
	help: `Lists the user's live sessions, newest first, as Manager.List does for a
"where you're signed in" page: a strongly consistent Query of the user's
index partition, then one read of those sessions' items with the user's.
Expired sessions, and those that a revocation ended, are left out. It needs
a table with a sort key, and users in the table (the library's default
LoadUser).

` + userHelp + `

Output: a table of ID, DEVICE (browser and system, from the User-Agent), FROM and LAST SEEN FROM
(the client's IP address at the sign-in and at the last refresh), CREATED,
LAST REFRESHED, EXPIRES (UTC), METHODS (how the user proved themselves at the login or
re-authentication that made the session, in the app's names, such as
password,otp; - for none recorded) and BOUND (device-bound, DBSC). With
-json: {"user": {"pk", "sk"}, "sessions": [{"id", "userAgent", "createdAt",
"refreshedAt", "expiresAt", "methods" (a list, [] for none), "deviceBound",
"address", "lastAddress" (absent where unknown)}]}, times in RFC 3339. Exits 3 if the user has no item in the table.

Example:
  ddbsession sessions list -table app USER#alice -sk PROFILE`,
	flags:     userFlags,
	indexOnly: "a hash-only table has no per-user index to list sessions from",
	run:       runSessionsList,
}

var sessionsRevokeCommand = &command{
	path:    "sessions revoke",
	args:    []string{"USER", "ID"},
	summary: "end one of a user's sessions, by its ID",
	help: `Ends the session ID of USER, as Manager.Revoke does ("sign out that
device"): its next request is refused, on every instance (in an MREC table,
with the end record that keeps another Region's write from bringing it
back). ID is the ID column of 'sessions list'. Exits 3 if USER has no such
session (an unknown ID and another user's are not told apart).

` + userHelp + `

Output: what it did. With -json: {"user": {"pk", "sk"}, "revoked": ID}.

Example:
  ddbsession sessions revoke -table app USER#alice -sk PROFILE 019a2b3c4d5e8f0e1d2c3b4a59687766`,
	flags:     userFlags,
	indexOnly: "a hash-only table has no per-user index to find the session in; use revoke-all",
	run:       runSessionsRevoke,
}

var sessionsRevokeAllCommand = &command{
	path:    "sessions revoke-all",
	args:    []string{"USER"},
	summary: "end every session of one user",
	help: `Ends every session of USER, as Manager.RevokeAll does ("log out
everywhere"): one conditional write that changes the user's sessions
version (Layout.VersionAttribute of the user item), no scan. Every session
created before it is refused on its next request, on every instance; a
login after it lives. In an MREC table (as its layout record says), it
changes the version in the user's revocation item and leaves the user item
alone, as the app does. Exits 3 if the user has no item in the table.

` + userHelp + `

Output: what it did. With -json: {"user": {"pk", "sk"}, "revokedAll": true}.

Example:
  ddbsession sessions revoke-all -table app USER#alice -sk PROFILE`,
	flags: userFlags,
	run:   runSessionsRevokeAll,
}

var sessionsRevokeEveryoneCommand = &command{
	path:    "sessions revoke-everyone",
	summary: "end every session of every user (asks first)",
	help: `Ends every session of every user, as Manager.RevokeEveryone does, for an
incident such as a leak of the table or of a secret its sessions rest on
(OWASP ASVS 5.0 7.4.5): one write of the table's global revocation
generation, no scan. Each running instance of the app applies it within its
Config.Limits.RevokeEveryoneWithin (10 s by default), when it next reads the
generation; in a global table, other Regions within the replication lag
besides. Users sign in again; nothing else about them changes.

It asks you to type the table's name first, unless -yes. Without -yes and
without a terminal on stdin it refuses (exit 4), as it does for any other
answer.

Output: what it did. With -json: {"table", "generation" (the new one),
"appliedWithin": "Config.Limits.RevokeEveryoneWithin (10s by default)"}.

Example:
  ddbsession sessions revoke-everyone -table app
  ddbsession sessions revoke-everyone -table app -yes -json`,
	flags: func(fs *flag.FlagSet, o *options) {
		fs.BoolVar(&o.yes, "yes", false, "do not ask: end every session at once")
	},
	run: runSessionsRevokeEveryone,
}

// userJSON is a user key in JSON.
type userJSON struct {
	PK string `json:"pk"`
	SK string `json:"sk,omitempty"`
}

// sessionJSON is one session in JSON.
type sessionJSON struct {
	ID          string    `json:"id"`
	UserAgent   string    `json:"userAgent"`
	CreatedAt   time.Time `json:"createdAt"`
	RefreshedAt time.Time `json:"refreshedAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	// Methods are Session.Methods: how the user proved themselves for the
	// session. [] for a login that named none, never null.
	Methods     []string `json:"methods"`
	DeviceBound bool     `json:"deviceBound"`
	// Address and LastAddress are the client's IP addresses at the
	// sign-in and the last refresh; absent where unknown.
	Address     string `json:"address,omitempty"`
	LastAddress string `json:"lastAddress,omitempty"`
}

// sessionJSONOf is a decoded session item in JSON.
func sessionJSONOf(s item.Session) sessionJSON {
	return sessionJSON{
		ID: s.ID, UserAgent: s.UserAgent, CreatedAt: s.CreatedAt.UTC(), RefreshedAt: s.RefreshedAt.UTC(),
		ExpiresAt: s.ExpiresAt.UTC(), Methods: append([]string{}, s.Methods...), DeviceBound: s.DeviceBound,
		Address: s.Address, LastAddress: s.LastAddress,
	}
}

type listJSON struct {
	User     userJSON      `json:"user"`
	Sessions []sessionJSON `json:"sessions"`
}

// deviceWidth bounds the DEVICE column on a terminal, for a tool's long
// product name; piped output has it whole.
const deviceWidth = 48

func runSessionsList(ctx context.Context, e *env, c *command, o *options, args []string) int {
	user := o.userKey(args[0])
	client, m, code := e.connectManager(ctx, c, o)
	if m == nil {
		return code
	}
	list, err := m.List(ctx, user)
	if err != nil {
		return e.fail(c, o, err)
	}
	if len(list) == 0 {
		// List answers an unknown user as one without sessions: tell them
		// apart.
		if found, err := userExists(ctx, client, o, user); err != nil {
			return e.fail(c, o, err)
		} else if !found {
			return e.userNotFound(c, o, user)
		}
	}
	out := listJSON{User: userJSON{PK: user.PK, SK: user.SK}, Sessions: []sessionJSON{}}
	for _, s := range list {
		out.Sessions = append(out.Sessions, sessionJSON{
			ID: s.ID, UserAgent: s.UserAgent, CreatedAt: s.CreatedAt.UTC(), RefreshedAt: s.RefreshedAt.UTC(),
			ExpiresAt: s.ExpiresAt.UTC(), Methods: append([]string{}, s.Methods...), DeviceBound: s.DeviceBound,
			Address: s.Address, LastAddress: s.LastAddress,
		})
	}
	if o.json {
		writeJSON(e.stdout, out)
		return exitOK
	}
	if len(list) == 0 {
		fmt.Fprintf(e.stdout, "%s has no live sessions\n", userString(user))
		return exitOK
	}
	terminal := e.isTerminal(e.stdout)
	var rows [][]string
	for _, s := range out.Sessions {
		device := deviceName(s.UserAgent)
		if terminal {
			device = truncate(device, deviceWidth)
		}
		methods := strings.Join(s.Methods, ",")
		if methods == "" {
			methods = "-"
		}
		rows = append(rows, []string{s.ID, device, cmp.Or(s.Address, "-"), cmp.Or(s.LastAddress, "-"),
			showTime(s.CreatedAt), showTime(s.RefreshedAt), showTime(s.ExpiresAt), methods, yesNo(s.DeviceBound)})
	}
	writeTable(e.stdout, []string{"ID", "DEVICE", "FROM", "LAST SEEN FROM", "CREATED", "LAST REFRESHED", "EXPIRES", "METHODS", "BOUND"}, rows)
	return exitOK
}

func runSessionsRevoke(ctx context.Context, e *env, c *command, o *options, args []string) int {
	user, id := o.userKey(args[0]), args[1]
	_, m, code := e.connectManager(ctx, c, o)
	if m == nil {
		return code
	}
	err := m.Revoke(ctx, user, id)
	if errors.Is(err, ddbsession.ErrNoSession) {
		fmt.Fprintf(e.stderr, "ddbsession %s: %s has no session %q (see 'ddbsession sessions list')\n", c.path, userString(user), id)
		return exitNotFound
	}
	if err != nil {
		return e.fail(c, o, err)
	}
	if o.json {
		writeJSON(e.stdout, struct {
			User    userJSON `json:"user"`
			Revoked string   `json:"revoked"`
		}{userJSON{user.PK, user.SK}, id})
		return exitOK
	}
	fmt.Fprintf(e.stdout, "revoked session %s of %s: its next request is refused\n", id, userString(user))
	return exitOK
}

func runSessionsRevokeAll(ctx context.Context, e *env, c *command, o *options, args []string) int {
	user := o.userKey(args[0])
	_, m, code := e.connectManager(ctx, c, o)
	if m == nil {
		return code
	}
	err := m.RevokeAll(ctx, user)
	if errors.Is(err, ddbsession.ErrUserNotFound) {
		return e.userNotFound(c, o, user)
	}
	if err != nil {
		return e.fail(c, o, err)
	}
	if o.json {
		writeJSON(e.stdout, struct {
			User       userJSON `json:"user"`
			RevokedAll bool     `json:"revokedAll"`
		}{userJSON{user.PK, user.SK}, true})
		return exitOK
	}
	fmt.Fprintf(e.stdout, "revoked every session of %s: each is refused on its next request, on every instance\n", userString(user))
	return exitOK
}

func runSessionsRevokeEveryone(ctx context.Context, e *env, c *command, o *options, _ []string) int {
	// The layout first: a question about a table the command would then
	// refuse to act on wastes the answer.
	client, m, code := e.connectManager(ctx, c, o)
	if m == nil {
		return code
	}
	if !o.yes {
		question := fmt.Sprintf("This ends every session of every user of table %q: everyone signs in again.\n"+
			"Type the table's name to go on: ", o.table)
		if code, ok := e.confirm(c, question, func(answer string) bool { return answer == o.table }); !ok {
			return code
		}
	}
	if err := m.RevokeEveryone(ctx); err != nil {
		return e.fail(c, o, err)
	}
	gen, err := globalGeneration(ctx, client, o)
	if err != nil {
		return e.fail(c, o, fmt.Errorf("revoked, but the generation could not be read back: %w", err))
	}
	const within = "Config.Limits.RevokeEveryoneWithin (10s by default)"
	if o.json {
		writeJSON(e.stdout, struct {
			Table         string `json:"table"`
			Generation    int64  `json:"generation"`
			AppliedWithin string `json:"appliedWithin"`
		}{o.table, gen, within})
		return exitOK
	}
	fmt.Fprintf(e.stdout, "revoked every session of table %q (global revocation generation %d).\n"+
		"Each running instance of the app applies it within its %s;\n"+
		"in a global table, other Regions within the replication lag besides.\n", o.table, gen, within)
	return exitOK
}

// confirm asks question on stderr and reads the answer from stdin: true if
// accept takes it. Without a terminal on stdin it does not ask, and
// declines.
func (e *env) confirm(c *command, question string, accept func(answer string) bool) (int, bool) {
	if !e.isTerminal(e.stdin) {
		fmt.Fprintf(e.stderr, "ddbsession %s: stdin is not a terminal, so it cannot ask: pass -yes to go on without asking\n", c.path)
		return exitDeclined, false
	}
	fmt.Fprint(e.stderr, question)
	answer, err := bufio.NewReader(e.stdin).ReadString('\n')
	if !accept(strings.TrimSpace(answer)) {
		if err != nil && answer == "" {
			fmt.Fprintln(e.stderr)
			fmt.Fprintf(e.stderr, "ddbsession %s: no answer (stdin ended); nothing was done\n", c.path)
			return exitDeclined, false
		}
		fmt.Fprintf(e.stderr, "ddbsession %s: declined; nothing was done\n", c.path)
		return exitDeclined, false
	}
	return exitOK, true
}

// connectManager connects, takes the layout from the table (open) and
// builds the Manager in it; on failure m is nil and code says why.
func (e *env) connectManager(ctx context.Context, c *command, o *options) (client Client, m *ddbsession.Manager[struct{}], code int) {
	client, _, code = e.open(ctx, c, o)
	if client == nil {
		return nil, nil, code
	}
	m, err := e.manager(client, o)
	if err != nil {
		return nil, nil, e.fail(c, o, err)
	}
	return client, m, exitOK
}

func (e *env) userNotFound(c *command, o *options, user ddbsession.UserKey) int {
	fmt.Fprintf(e.stderr, "ddbsession %s: no user item %s in table %q\n", c.path, userString(user), o.table)
	return exitNotFound
}

// userExists reports whether the user has an item in the table: one
// strongly consistent read of its key alone.
func userExists(ctx context.Context, client Client, o *options, user ddbsession.UserKey) (bool, error) {
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                &o.table,
		Key:                      o.items.Key(user.PK, user.SK),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#pk"),
		ExpressionAttributeNames: map[string]string{"#pk": o.items.PartitionKey},
	})
	if err != nil {
		return false, fmt.Errorf("read the user item: %w", err)
	}
	return out.Item != nil, nil
}

// globalGeneration reads the table's global revocation generation.
func globalGeneration(ctx context.Context, client Client, o *options) (int64, error) {
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &o.table, Key: o.items.GlobalKey(), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, err
	}
	return item.DecodeGlobal(out.Item)
}
