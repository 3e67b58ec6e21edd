package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/item"
)

// This file reaches DynamoDB: the client, the Manager the commands work
// through, and the words for what goes wrong on the way.

// Client is the part of the DynamoDB client that the command uses: the
// library's, the table methods of table create and check, and Scan for
// sweep and count. *dynamodb.Client satisfies it.
type Client interface {
	ddbsession.Client
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// endpointEnv is the SDK's own variable for a DynamoDB endpoint of one's
// choosing, such as a local engine.
const endpointEnv = "AWS_ENDPOINT_URL_DYNAMODB"

// connectAWS builds a client from the SDK's usual configuration, and
// makes sure there is a Region and credentials before any call, so that
// their absence gets words of its own.
func connectAWS(ctx context.Context, o *options) (Client, error) {
	var opts []func(*config.LoadOptions) error
	if o.region != "" {
		opts = append(opts, config.WithRegion(o.region))
	}
	if o.profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(o.profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, &setupError{what: "load the AWS configuration", err: err}
	}
	if cfg.Region == "" {
		return nil, &setupError{what: "find the AWS Region", err: errors.New("none is set: set AWS_REGION, pass -region, or name one in the profile")}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := cfg.Credentials.Retrieve(rctx); err != nil {
		return nil, &setupError{what: "find AWS credentials", err: err, hint: credentialsHint(os.Getenv(endpointEnv))}
	}
	return dynamodb.NewFromConfig(cfg), nil
}

// credentialsHint says where credentials come from, for an endpoint of
// AWS_ENDPOINT_URL_DYNAMODB ("" when unset).
func credentialsHint(endpoint string) string {
	const dynamoDB = "Set AWS_PROFILE (after 'aws sso login' for an SSO profile), or AWS_ACCESS_KEY_ID and\n" +
		"AWS_SECRET_ACCESS_KEY, or run where a role provides them."
	if endpoint != "" {
		return dynamoDB + "\n" + endpointEnv + " is set, to " + endpoint + ": a local engine takes any\n" +
			"credentials, e.g. AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x."
	}
	return dynamoDB + " For a local engine\n(dynalite, for one), set " + endpointEnv + " to its URL (http://127.0.0.1:8000, say),\n" +
		"AWS_REGION=us-east-1 and any credentials: AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x."
}

// setupError is an AWS configuration that cannot reach DynamoDB.
type setupError struct {
	what string
	err  error
	hint string
}

func (e *setupError) Error() string { return "cannot " + e.what + ": " + e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// manager is the library's Manager for the table the flags name, in the
// layout the command acts in (o.items). The command never decodes users,
// so its user type is empty.
func (e *env) manager(client Client, o *options) (*ddbsession.Manager[struct{}], error) {
	return ddbsession.New(ddbsession.Config[struct{}]{
		Client: client,
		Table:  o.table,
		Layout: ddbsession.Layout(o.items),
		Limits: ddbsession.Limits{
			// One call's bound: an operator's link can be slower than an
			// app's, and nobody waits on a request here.
			StoreTimeout: 30 * time.Second,
		},
		Logger: slog.New(&warnings{w: e.stderr}),
		Now:    e.now,
	})
}

// fail prints what went wrong, in words an operator acts on, and returns
// the exit code for it.
func (e *env) fail(c *command, o *options, err error) int {
	code, text := explain(o, err)
	fmt.Fprintf(e.stderr, "ddbsession %s: %s\n", c.path, text)
	return code
}

// explain returns the exit code for err and what to say of it.
func explain(o *options, err error) (int, string) {
	endpoint := os.Getenv(endpointEnv)
	var setup *setupError
	var notFound *types.ResourceNotFoundException
	var api smithy.APIError
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var resp *smithyhttp.ResponseError
	var layout *layoutError
	var mismatch *item.LayoutMismatch
	msg := err.Error()
	switch {
	case errors.As(err, &layout):
		return exitSchema, layout.Error()
	case errors.As(err, &mismatch):
		// The library's check, which the command's own came before: a
		// record written in between.
		return exitSchema, layoutFlagNames.Replace(msg)
	case errors.As(err, &setup):
		if setup.hint != "" {
			return exitFailure, setup.Error() + "\n" + setup.hint
		}
		return exitFailure, setup.Error()
	case errors.As(err, &notFound):
		return exitNotFound, fmt.Sprintf("table %q does not exist %s. Create it with:\n  ddbsession table create -table %s%s",
			o.table, where(o), shellQuote(o.table), layoutArgs(o))
	case errors.As(err, &api):
		switch api.ErrorCode() {
		case "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException", "InvalidClientTokenId":
			return exitFailure, fmt.Sprintf("DynamoDB refused the credentials (%s: %s). Check AWS_PROFILE or the access keys; an expired SSO session needs 'aws sso login'.",
				api.ErrorCode(), api.ErrorMessage())
		case "AccessDeniedException":
			return exitFailure, fmt.Sprintf("the credentials may not do this (%s). Grant the IAM permission the message names.", api.ErrorMessage())
		}
	case errors.Is(err, context.Canceled):
		return exitFailure, "interrupted"
	case strings.Contains(msg, "failed to resolve service endpoint"), strings.Contains(msg, "unsupported protocol scheme"):
		if endpoint != "" {
			return exitFailure, fmt.Sprintf("%s is set, to %q, which is not a URL: it needs a scheme, as in http://127.0.0.1:8000", endpointEnv, endpoint)
		}
	case errors.As(err, &opErr), errors.As(err, &dnsErr):
		// The network's own words, without what the layers above added.
		cause := error(dnsErr)
		if opErr != nil {
			cause = opErr
		}
		if endpoint != "" {
			return exitFailure, fmt.Sprintf("cannot reach DynamoDB at %s=%s: is the engine running there? (%v)", endpointEnv, endpoint, cause)
		}
		return exitFailure, fmt.Sprintf("cannot reach DynamoDB %s: check the network and the Region (%v)", where(o), cause)
	case errors.As(err, &resp) && resp.HTTPStatusCode() != 0:
		// An answer, but not in DynamoDB's form: no API error in it.
		if endpoint != "" {
			return exitFailure, fmt.Sprintf("%s is set, to %s, and it does not answer as DynamoDB (HTTP %d):\n"+
				"point it at a DynamoDB engine (dynalite, for one), or unset it for DynamoDB itself", endpointEnv, endpoint, resp.HTTPStatusCode())
		}
		return exitFailure, fmt.Sprintf("DynamoDB %s answered HTTP %d in a form DynamoDB never does: is a proxy in the way? (%v)", where(o), resp.HTTPStatusCode(), err)
	}
	return exitFailure, msg
}

// where says which DynamoDB the command talks to, as far as it knows.
func where(o *options) string {
	if endpoint := os.Getenv(endpointEnv); endpoint != "" {
		return "at " + endpoint + " (" + endpointEnv + ")"
	}
	region := o.region
	if region == "" {
		region = os.Getenv("AWS_REGION")
	}
	if region == "" {
		return "in the profile's Region"
	}
	return "in " + region
}

// layoutArgs are the layout flags of o as a command line would repeat
// them, each with a leading space.
func layoutArgs(o *options) string {
	var b strings.Builder
	l := o.layout
	for _, f := range []struct{ name, value string }{
		{"partition-key", l.PartitionKey}, {"sort-key", l.SortKey},
		{"session-prefix", l.SessionPrefix}, {"user-sessions-prefix", l.UserSessionsPrefix},
		{"ttl-attribute", l.TTLAttribute}, {"version-attribute", l.VersionAttribute},
		{"credential-attribute", l.CredentialAttribute}, {"expiry-index", l.ExpiryIndex},
	} {
		if f.value != "" {
			fmt.Fprintf(&b, " -%s %s", f.name, shellQuote(f.value))
		}
	}
	if l.HashOnly {
		b.WriteString(" -hash-only")
	}
	if l.ExpiryIndexShards != 0 {
		fmt.Fprintf(&b, " -expiry-index-shards %d", l.ExpiryIndexShards)
	}
	if l.MREC {
		b.WriteString(" -mrec")
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell where it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// warnings is the Manager's logger: its warnings (a table without TTL,
// say) as lines on stderr. Below Warn, nothing.
type warnings struct {
	w io.Writer
}

func (h *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *warnings) Handle(_ context.Context, r slog.Record) error {
	level := "warning"
	if r.Level >= slog.LevelError {
		level = "error"
	}
	msg := strings.TrimPrefix(r.Message, "ddbsession: ")
	var extra []string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "table" {
			extra = append(extra, a.String())
		}
		return true
	})
	if len(extra) > 0 {
		msg += " (" + strings.Join(extra, " ") + ")"
	}
	_, err := fmt.Fprintf(h.w, "%s: %s\n", level, msg)
	return err
}

func (h *warnings) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *warnings) WithGroup(string) slog.Handler { return h }
