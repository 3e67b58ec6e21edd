package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// Every command has a -h that says what it does, with an example and the
// exit codes, on stdout with exit 0; help COMMAND says the same.
func TestHelp(t *testing.T) {
	t.Parallel()
	f := &fixture{t: t}
	for _, c := range commands {
		t.Run(c.path, func(t *testing.T) {
			args := append(strings.Fields(c.path), "-h")
			code, stdout, stderr := f.runBare(args...)
			wantCode(t, code, exitOK, stdout, stderr)
			for _, want := range []string{"Usage: ddbsession " + c.path, "Example:", "ddbsession " + c.path + " -table", "Exit codes:", "-table name", "-sort-key"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("-h does not say %q:\n%s", want, stdout)
				}
			}
			code, help, _ := f.runBare(append([]string{"help"}, strings.Fields(c.path)...)...)
			if code != exitOK || help != stdout {
				t.Errorf("help %s: exit %d, and not -h's text:\n%s", c.path, code, help)
			}
		})
	}
	for _, args := range [][]string{{"-h"}, {"help"}, {"--help"}} {
		code, stdout, stderr := f.runBare(args...)
		wantCode(t, code, exitOK, stdout, stderr)
		for _, c := range commands {
			if !strings.Contains(stdout, c.path) {
				t.Errorf("%v does not list %q:\n%s", args, c.path, stdout)
			}
		}
	}
}

// Usage errors exit 2, say what is wrong on stderr, and call no DynamoDB.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"nothing", nil, "Usage: ddbsession COMMAND"},
		{"unknown command", []string{"sessions", "frobnicate", "-table", "app"}, `no command "sessions frobnicate"`},
		{"a group alone", []string{"table", "-table", "app"}, "no command"},
		{"no -table", []string{"table", "check"}, "-table is required"},
		{"unknown flag", []string{"sweep", "-table", "app", "-fast"}, "flag provided but not defined: -fast"},
		{"no USER", []string{"sessions", "list", "-table", "app", "-sk", "PROFILE"}, "missing USER"},
		{"no ID", []string{"sessions", "revoke", "-table", "app", "-sk", "PROFILE", "USER#alice"}, "missing ID"},
		{"extra argument", []string{"sessions", "revoke-all", "-table", "app", "-sk", "PROFILE", "USER#alice", "USER#bob"}, `unexpected argument "USER#bob"`},
		{"no -sk in a table said to have a sort key", []string{"sessions", "list", "-table", "app", "-sort-key", "sk", "USER#alice"}, "add -sk"},
		// The user keys that List, Revoke and RevokeAll refuse: the
		// command's own check comes first, and calls nothing.
		{"empty USER to list", []string{"sessions", "list", "-table", "app", "-sk", "PROFILE", ""}, "USER is empty"},
		{"empty USER to revoke", []string{"sessions", "revoke", "-table", "app", "-sk", "PROFILE", "", "019a2b3c4d5e8f0e1d2c3b4a59687766"}, "USER is empty"},
		{"empty USER to revoke-all", []string{"sessions", "revoke-all", "-table", "app", "-sk", "PROFILE", ""}, "USER is empty"},
		{"empty -sk", []string{"sessions", "revoke-all", "-table", "app", "-hash-only=false", "-sk", "", "USER#alice"}, "add -sk"},
		{"empty ID", []string{"sessions", "revoke", "-table", "app", "-sk", "PROFILE", "USER#alice", ""}, "ID is empty"},
		{"-sk in a hash-only table", []string{"sessions", "revoke-all", "-table", "app", "-hash-only", "-sk", "PROFILE", "USER#alice"}, "-sk is set"},
		{"list in a hash-only table", []string{"sessions", "list", "-table", "app", "-hash-only", "USER#alice"}, "no per-user index"},
		{"bad layout", []string{"table", "check", "-table", "app", "-partition-key", "sk"}, "-partition-key and -sort-key are both"},
		{"negative rate", []string{"sweep", "-table", "app", "-max-wcu", "-1"}, "must not be negative"},
		{"too many segments", []string{"count", "-table", "app", "-segments", "1000"}, "-segments 1000"},
		{"scs prefix is the session prefix", []string{"sweep", "-table", "app", "-scs-prefix", "SESSION#"}, "-scs-prefix"},
		{"import without -redis", []string{"import", "-table", "app"}, "-redis is required"},
		{"import from no address", []string{"import", "-table", "app", "-redis", "cache"}, "want HOST:PORT"},
		{"import from a URL of another scheme", []string{"import", "-table", "app", "-redis", "http://:pw@cache:6379"}, "want HOST:PORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fixture{t: t, probe: ddbtest.NewProbe(nil)} // a nil client: any call panics
			code, stdout, stderr := f.runBare(tc.args...)
			wantCode(t, code, exitUsage, stdout, stderr)
			if !strings.Contains(stderr, tc.says) {
				t.Errorf("stderr does not say %q:\n%s", tc.says, stderr)
			}
		})
	}
}

// Whether a USER needs -sk is the table's to say, when no flag says it:
// its layout record. A table with a sort key refuses a USER without one,
// before any write (exit 2).
func TestUserKeyNeedsTheTablesSortKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.login(f.user("alice"), curl)
	for _, args := range [][]string{
		{"sessions", "list", "USER#alice"},
		{"sessions", "revoke-all", "USER#alice"},
		{"sessions", "revoke-all", "-sk", "", "USER#alice"},
	} {
		code, stdout, stderr := f.run(args...)
		wantCode(t, code, exitUsage, stdout, stderr)
		if !strings.Contains(stderr, "add -sk") {
			t.Errorf("%v: stderr does not say to add -sk:\n%s", args, stderr)
		}
	}
	if !f.valid(a) {
		t.Error("a refused revoke-all ended the session")
	}
}

// Flags go anywhere among the arguments, and "--" ends them.
func TestInterspersedFlags(t *testing.T) {
	t.Parallel()
	o := &options{}
	fs := sessionsListCommand.flagSet(o)
	pos, err := parseInterspersed(fs, []string{"-table", "app", "USER#alice", "-sk", "PROFILE", "--", "-odd", "-json"})
	if err != nil {
		t.Fatal(err)
	}
	if o.table != "app" || o.sk != "PROFILE" || o.json || strings.Join(pos, " ") != "USER#alice -odd -json" {
		t.Errorf("table %q, sk %q, json %v, positional %q", o.table, o.sk, o.json, pos)
	}
}

// The command reaches the engine through the SDK's own configuration, as
// an operator runs it: AWS_ENDPOINT_URL_DYNAMODB, which ddbtest.Main set,
// and the credentials in the environment.
func TestRunWithSDKConfiguration(t *testing.T) {
	f := newFixture(t)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"sessions", "revoke-all", "-table", f.table, "-sk", "PROFILE", "USER#nobody"}, strings.NewReader(""), &stdout, &stderr)
	wantCode(t, code, exitNotFound, stdout.String(), stderr.String())
	f.user("alice")
	stdout.Reset()
	code = run(context.Background(), []string{"sessions", "revoke-all", "-table", f.table, "-sk", "PROFILE", "USER#alice"}, strings.NewReader(""), &stdout, &stderr)
	wantCode(t, code, exitOK, stdout.String(), stderr.String())
}

// Without credentials, a Region or a running engine, or with an endpoint
// that is no DynamoDB, the command says what to do (exit 1), in words for
// an installed command: nothing of this repository's scripts, and nothing
// that says to set AWS_ENDPOINT_URL_DYNAMODB where it is set, but where it
// points. The command that reaches DynamoDB through the library
// (revoke-all) says the same as the one that calls it itself (check).
func TestConnectErrors(t *testing.T) {
	// A port that refuses connections and stays bound, so that no other
	// test's listener can take it meanwhile (a closed listener's could).
	refusing, err := ddbtest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer refusing.Close()
	if err := refusing.Refuse(); err != nil {
		t.Fatal(err)
	}
	nowhere := "http://" + refusing.Addr().String()
	// An endpoint that answers HTTP, but not as DynamoDB does.
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "<html><body>Not Found</body></html>")
	}))
	defer web.Close()
	engine := os.Getenv(endpointEnv)
	for _, tc := range []struct {
		name   string
		env    map[string]string
		says   []string
		saysNo []string
	}{
		{"no credentials", map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""},
			[]string{"cannot find AWS credentials", "AWS_PROFILE", "AWS_ENDPOINT_URL_DYNAMODB is set, to " + engine, "AWS_ACCESS_KEY_ID=x"},
			[]string{"set AWS_ENDPOINT_URL_DYNAMODB"}},
		{"no Region", map[string]string{"AWS_REGION": ""}, []string{"cannot find the AWS Region", "AWS_REGION", "-region"}, nil},
		{"no engine", map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": nowhere},
			[]string{"cannot reach DynamoDB at AWS_ENDPOINT_URL_DYNAMODB=" + nowhere, "is the engine running", "connection refused"},
			[]string{"set AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000"}},
		{"not DynamoDB", map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": web.URL},
			[]string{"AWS_ENDPOINT_URL_DYNAMODB is set, to " + web.URL, "does not answer as DynamoDB (HTTP 404)", "(dynalite, for one)", "unset it"},
			[]string{"set AWS_ENDPOINT_URL_DYNAMODB"}},
		{"no URL", map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "127.0.0.1:8000"},
			[]string{`AWS_ENDPOINT_URL_DYNAMODB is set, to "127.0.0.1:8000", which is not a URL`, "http://127.0.0.1:8000"},
			[]string{"set AWS_ENDPOINT_URL_DYNAMODB"}},
	} {
		for _, args := range [][]string{{"table", "check"}, {"sessions", "revoke-all", "-sk", "PROFILE", "USER#alice"}} {
			t.Run(tc.name+"/"+args[1], func(t *testing.T) {
				for k, v := range tc.env {
					t.Setenv(k, v)
				}
				var stdout, stderr bytes.Buffer
				code := run(context.Background(), append(args, "-table", "app"), strings.NewReader(""), &stdout, &stderr)
				wantCode(t, code, exitFailure, stdout.String(), stderr.String())
				for _, want := range tc.says {
					if !strings.Contains(stderr.String(), want) {
						t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
					}
				}
				for _, unwanted := range append(tc.saysNo, "with-dynalite", "DynamoDB Local") {
					if strings.Contains(stderr.String(), unwanted) {
						t.Errorf("stderr says %q:\n%s", unwanted, stderr.String())
					}
				}
			})
		}
	}
}

// Without AWS_ENDPOINT_URL_DYNAMODB, the words for a missing engine or
// credentials suggest a local engine, dynalite for one, and how to reach
// it; and no error tells of this repository's scripts. Tried on errors
// alone: no test reaches for DynamoDB itself.
func TestHintsWithoutEndpoint(t *testing.T) {
	t.Setenv(endpointEnv, "")
	t.Setenv("AWS_REGION", "eu-west-1")
	hint := credentialsHint("")
	for _, want := range []string{"AWS_PROFILE", "For a local engine\n(dynalite, for one), set AWS_ENDPOINT_URL_DYNAMODB to its URL (http://127.0.0.1:8000, say)", "AWS_ACCESS_KEY_ID=x"} {
		if !strings.Contains(hint, want) {
			t.Errorf("the credentials hint does not say %q:\n%s", want, hint)
		}
	}
	dial := fmt.Errorf("ddbsession: revoke all sessions: table \"app\": %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")})
	notDynamoDB := &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 502}}, Err: errors.New("not JSON")}
	o := &options{table: "app"}
	for _, tc := range []struct {
		err  error
		says string
	}{
		{dial, "cannot reach DynamoDB in eu-west-1: check the network and the Region (dial tcp: connect: connection refused)"},
		{notDynamoDB, "DynamoDB in eu-west-1 answered HTTP 502 in a form DynamoDB never does"},
	} {
		code, text := explain(o, tc.err)
		if code != exitFailure || !strings.Contains(text, tc.says) || strings.Contains(text, "with-dynalite") || strings.Contains(text, endpointEnv+" is set") {
			t.Errorf("explain(%v) = %d, %q; want 1 and %q", tc.err, code, text, tc.says)
		}
	}
}

// A confirmation is asked on a terminal only: a stdin of /dev/null, as
// cron and systemd give, or a pipe, is told to pass -yes, and nothing is
// done.
func TestConfirmNeedsATerminal(t *testing.T) {
	t.Parallel()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	pw.Close()
	if isTerminal(devNull) || isTerminal(pr) || isTerminal(strings.NewReader("")) {
		t.Errorf("isTerminal: /dev/null %v, a pipe %v, a reader %v; want none", isTerminal(devNull), isTerminal(pr), isTerminal(strings.NewReader("")))
	}
	if ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0); err == nil {
		defer ptmx.Close()
		if !isTerminal(ptmx) {
			t.Error("isTerminal(/dev/ptmx) = false, want a terminal")
		}
	}

	f := newFixture(t)
	a := f.login(f.user("alice"), firefox)
	for _, args := range [][]string{{"sessions", "revoke-everyone"}, {"count"}} {
		var stdout, stderr bytes.Buffer
		e := newEnv(devNull, &stdout, &stderr)
		e.connect = func(context.Context, *options) (Client, error) { return f.probe, nil }
		code := e.run(context.Background(), append(args, "-table", f.table))
		wantCode(t, code, exitDeclined, stdout.String(), stderr.String())
		if !strings.Contains(stderr.String(), "stdin is not a terminal") || !strings.Contains(stderr.String(), "pass -yes") ||
			strings.Contains(stderr.String(), "Type the table's name") || strings.Contains(stderr.String(), "Go on?") {
			t.Errorf("%v with stdin /dev/null: stderr:\n%s", args, stderr.String())
		}
	}
	if !f.valid(a) || f.probe.Count("Scan") != 0 {
		t.Errorf("declined, yet the session is valid %v, %d Scans", f.valid(a), f.probe.Count("Scan"))
	}
}

// The command builds from the standard library, the AWS SDK and this
// repository's own packages alone.
func TestPackageDeps(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(pkg, "github.com/ddbsession/ddbsession"):
		case strings.HasPrefix(pkg, "github.com/aws/aws-sdk-go-v2/"), strings.HasPrefix(pkg, "github.com/aws/smithy-go"):
		default:
			t.Errorf("the command depends on %s, want only the AWS SDK and this repository", pkg)
		}
	}
}

// Every command works with -table alone on a table whose layout is not the
// default: the layout comes from the table's record, never from flags
// repeated on each command.
func TestCommandsNeedNoLayoutFlags(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *ddbsession.Config[testUser]) {
		c.Layout = ddbsession.Layout{SessionPrefix: "S#", UserSessionsPrefix: "US#", TTLAttribute: "ttl",
			VersionAttribute: "sv", CredentialAttribute: "cv", ExpiryIndex: "expiry", ExpiryIndexShards: 2}
	})
	alice, bob := f.user("alice"), f.user("bob")
	a1, a2, b := f.login(alice, curl), f.login(alice, curl), f.login(bob, curl)
	list, err := f.app.List(context.Background(), alice)
	if err != nil || len(list) != 2 {
		t.Fatalf("List: %v, %d sessions", err, len(list))
	}
	id := list[1].ID // the older: a1's
	for _, tc := range []struct {
		args []string
		want []int
	}{
		{[]string{"table", "check"}, []int{exitOK, exitTTL}}, // exit 6 on an engine without TTL: it fits all the same
		{[]string{"sessions", "list", alice.PK, "-sk", alice.SK}, []int{exitOK}},
		{[]string{"sessions", "expiring", "-within", "24h"}, []int{exitOK}},
		{[]string{"count", "-yes"}, []int{exitOK}},
		{[]string{"sweep", "-dry-run"}, []int{exitOK}},
		{[]string{"sessions", "revoke", alice.PK, id, "-sk", alice.SK}, []int{exitOK}},
		{[]string{"sessions", "revoke-all", bob.PK, "-sk", bob.SK}, []int{exitOK}},
	} {
		code, stdout, stderr := f.run(tc.args...)
		if !slices.Contains(tc.want, code) {
			t.Errorf("%v: exit %d, want one of %v\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.want, stdout, stderr)
		}
	}
	if f.valid(a1) || !f.valid(a2) || f.valid(b) {
		t.Errorf("after revoke of a1 and revoke-all of bob: valid a1 %v, a2 %v, b %v; want false, true, false", f.valid(a1), f.valid(a2), f.valid(b))
	}
	code, stdout, stderr := f.run("sessions", "revoke-everyone", "-yes")
	wantCode(t, code, exitOK, stdout, stderr)
	if f.valid(a2) {
		t.Error("a session outlived revoke-everyone, run without layout flags")
	}
}

// The table and layout flags may come from the environment; the command
// line wins, and a layout variable is an override held to the table's
// record, as its flag is.
func TestFlagsFromEnvironment(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := f.user("alice")
	f.login(alice, curl)
	f.environ = map[string]string{"DDBSESSION_TABLE": f.table}
	code, stdout, stderr := f.runBare("sessions", "list", "-json", alice.PK, "-sk", alice.SK)
	wantCode(t, code, exitOK, stdout, stderr)
	var got listJSON
	decode(t, stdout, &got)
	if len(got.Sessions) != 1 {
		t.Errorf("DDBSESSION_TABLE: %d sessions listed, want 1", len(got.Sessions))
	}

	f.environ = map[string]string{"DDBSESSION_TABLE": "no-such-table"}
	code, stdout, stderr = f.runBare("sessions", "list", "-table", f.table, alice.PK, "-sk", alice.SK)
	wantCode(t, code, exitOK, stdout, stderr) // -table wins

	f.environ = map[string]string{"DDBSESSION_TABLE": f.table, "DDBSESSION_SESSION_PREFIX": "S#"}
	code, stdout, stderr = f.runBare("sessions", "revoke-all", alice.PK, "-sk", alice.SK)
	wantCode(t, code, exitSchema, stdout, stderr)
	if !strings.Contains(stderr, "-session-prefix") {
		t.Errorf("a layout variable that disagrees with the record: stderr does not name the flag:\n%s", stderr)
	}

	f.environ = map[string]string{"DDBSESSION_TABLE": f.table, "DDBSESSION_MREC": "maybe"}
	code, stdout, stderr = f.runBare("sessions", "list", alice.PK, "-sk", alice.SK)
	wantCode(t, code, exitUsage, stdout, stderr)
	if !strings.Contains(stderr, `DDBSESSION_MREC="maybe"`) {
		t.Errorf("a bad variable: stderr does not name it:\n%s", stderr)
	}
}
