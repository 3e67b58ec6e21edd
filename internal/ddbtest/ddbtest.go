// Package ddbtest gives tests a DynamoDB-compatible engine, and keeps every
// test process away from AWS and from the caller's own credentials. It is
// the one implementation behind this project's own tests and behind
// ddbsessiontest, the public package that gives an app's tests the same.
//
// # Engines
//
// [Main] finds the engine, in this order:
//
//  1. AWS_ENDPOINT_URL_DYNAMODB, the SDK's own variable, if set (the
//     project's scripts/test starts the pinned dynalite and sets it);
//  2. where Node.js is on PATH, the pinned dynalite (the lockfile in
//     dynalite/, which the scripts install from too): installed with npm ci,
//     once per machine, into the user's cache directory (see
//     [InstallDynalite]), and started on a free loopback port for the test
//     binary's lifetime. It exits when the test binary does, however that
//     ends, because it watches its stdin, a pipe the test binary holds;
//  3. otherwise Main says what it tried, that Node.js is missing if it is,
//     and how to give the tests an engine, and returns 1 before any test
//     runs. Tests never skip for want of one.
//
// An engine that Main starts is published through AWS_ENDPOINT_URL_DYNAMODB,
// so that code under test finds it the way an app finds any engine: through
// the SDK's own configuration.
//
// # Never AWS
//
// Main refuses an endpoint on an AWS host (amazonaws.com, api.aws and the
// other partitions' domains, see [CheckEndpoint]). It also replaces the
// process's AWS settings with fixed dummy ones: static placeholder
// credentials, region us-east-1, no profile, no session token, shared config
// and credentials files that do not exist, and no EC2 instance metadata.
// Code under test that builds its client from the SDK's configuration, as an
// app does (config.LoadDefaultConfig, including in runnable examples), so
// reaches the test engine and nothing else. [Client] builds its client from
// explicit dummy credentials and the endpoint besides.
//
// # Time to Live
//
// dynalite does not implement UpdateTimeToLive. [WithTTL] wraps a client so
// that tests needing TTL on a table get it emulated in memory on such an
// engine, and [SupportsTTL] tells whether the engine implements it itself.
//
// # Capacity
//
// No local engine holds a partition key to DynamoDB's 3,000 read and 1,000
// write units a second, and dynalite bills only part of what DynamoDB
// bills. [Partitions] fronts an engine to do both: it bills each call as
// DynamoDB does, from item sizes ([ItemSize]), indexes included, and
// throttles each partition key at those limits scaled down, on a virtual
// clock, as DynamoDB throttles it.
//
// # Clocks and the counting client
//
// Every test of the project moves time with one [Clock] (the wall clock a
// config's Now reads) and one [Mono] (the monotonic clock that ages an
// instance's copy of the shared items), and counts or fails calls with one
// [Probe]: one of each, shared by every module's tests, rather than a copy
// per file that drifts from the others.
package ddbtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

const endpointEnv = "AWS_ENDPOINT_URL_DYNAMODB"

// The dummy credentials and region of every test process.
const (
	dummyAccessKeyID     = "ddbtest"
	dummySecretAccessKey = "ddbtest"
	testRegion           = "us-east-1"
)

// mainRan is set by Main before the tests start, so that Client can tell a
// package whose TestMain forgot it.
var mainRan bool

// A Harness is this package as a public package presents it: Name, that
// package's name, is the one its messages use. ddbsessiontest is such a
// package; this project's own tests use the package-level functions,
// which are those of a Harness named ddbtest.
type Harness struct {
	Name string
}

var project = Harness{Name: "ddbtest"}

// Main is [Harness.Main] for this project's own tests.
func Main(m *testing.M) int { return project.Main(m) }

// Client is [Harness.Client] for this project's own tests.
func Client(t testing.TB) *dynamodb.Client { return project.Client(t) }

// Main runs a package's tests with an engine in place: call it from
// TestMain as os.Exit(Main(m)). It returns 1 without running any test when
// there is no engine or the endpoint is an AWS one. An engine it starts
// runs until Main returns.
func (h Harness) Main(m *testing.M) int {
	isolateAWSConfig()
	endpoint := os.Getenv(endpointEnv)
	if endpoint == "" {
		var stop func()
		var err error
		endpoint, stop, err = h.startEngine()
		defer stop()
		if err != nil {
			fmt.Fprint(os.Stderr, h.instructions(err))
			return 1
		}
		os.Setenv(endpointEnv, endpoint)
	} else {
		engine = "the engine at " + endpoint + " (" + endpointEnv + ")"
	}
	if err := CheckEndpoint(endpoint); err != nil {
		fmt.Fprint(os.Stderr, h.instructions(err))
		return 1
	}
	mainRan = true
	code := m.Run()
	if second.stop != nil {
		second.stop()
	}
	return code
}

// second is the engine of SecondClient, started on first use.
var second struct {
	once     sync.Once
	endpoint string
	stop     func()
	err      error
}

// SecondClient returns a client for a second engine of its own, for tests
// that need two independent ones, such as two Regions of a global table
// (see [Regions]): the pinned dynalite, started on first use and stopped
// when Main returns. It needs Node.js, as dynalite does.
func SecondClient(t testing.TB) *dynamodb.Client {
	t.Helper()
	if !mainRan {
		t.Fatal("ddbtest: SecondClient needs the package's TestMain to call ddbtest.Main")
	}
	second.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
		defer cancel()
		second.endpoint, second.stop, second.err = startDynalite(ctx, "ddbtest (second engine)")
	})
	if second.err != nil {
		t.Fatalf("ddbtest: a second engine: %v", second.err)
	}
	return newClient(second.endpoint)
}

// startEngine starts the engine that h's engine variable names: the
// pinned dynalite with Node.js by default, or moto; and returns its
// endpoint and a function that stops it, or says what it tried.
func (h Harness) startEngine() (endpoint string, stop func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	switch engine = cmp.Or(os.Getenv(h.engineEnv()), engineDynalite); engine {
	case engineDynalite:
		endpoint, stop, err = startDynalite(ctx, h.Name)
	case engineMoto:
		endpoint, stop, err = startMoto(ctx, h.Name)
	default:
		return "", func() {}, fmt.Errorf("%s=%q names no engine: %s or %s", h.engineEnv(), engine, engineDynalite, engineMoto)
	}
	if err != nil {
		return "", stop, fmt.Errorf("%s is not set; %v", endpointEnv, err)
	}
	return endpoint, stop, nil
}

// instructions says why there is no engine and how to give the tests one.
func (h Harness) instructions(reason error) string {
	dir, err := dynaliteDir()
	if err != nil {
		dir = "the user's cache directory"
	}
	return fmt.Sprintf("%s: no DynamoDB engine for these tests: %v.\n"+
		"No test ran. Any one of these gives the tests an engine:\n"+
		"  - Node.js %s or later, with npm, on PATH: the tests install the pinned dynalite %s once,\n"+
		"    into %s, and start it themselves;\n"+
		"  - an engine you start yourself, named by the SDK's variable:\n"+
		"    AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 go test ./...\n",
		h.Name, reason, minNodeVersion, dynaliteVersion(), dir)
}

// isolateAWSConfig replaces the process's AWS settings with dummy ones, so
// that no client built from the SDK's configuration can use the caller's
// credentials, profile or instance role.
func isolateAWSConfig() {
	for _, name := range []string{
		"AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
		"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_DEFAULT_REGION",
		"AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
		// It would make the SDK ignore AWS_ENDPOINT_URL_DYNAMODB, and so
		// go to DynamoDB itself.
		"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
	} {
		os.Unsetenv(name)
	}
	// A directory that does not exist, so neither can the files in it.
	nowhere := filepath.Join(os.TempDir(), "ddbtest-no-aws-config-"+rand.Text())
	for name, value := range map[string]string{
		"AWS_ACCESS_KEY_ID":           dummyAccessKeyID,
		"AWS_SECRET_ACCESS_KEY":       dummySecretAccessKey,
		"AWS_REGION":                  testRegion,
		"AWS_CONFIG_FILE":             filepath.Join(nowhere, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(nowhere, "credentials"),
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		os.Setenv(name, value)
	}
}

// awsDNSSuffixes are the domains of AWS's partitions, with their dual-stack
// ones, as the SDK's endpoint rules list them
// (aws-sdk-go-v2 internal/endpoints/awsrulesfn/partitions.json).
var awsDNSSuffixes = []string{
	"amazonaws.com", "api.aws", // aws, aws-us-gov
	"amazonaws.com.cn", "api.amazonwebservices.com.cn", // aws-cn
	"amazonaws.eu", "api.amazonwebservices.eu", // aws-eusc
	"c2s.ic.gov", "api.aws.ic.gov", // aws-iso
	"sc2s.sgov.gov", "api.aws.scloud", // aws-iso-b
	"cloud.adc-e.uk", "api.cloud-aws.adc-e.uk", // aws-iso-e
	"csp.hci.ic.gov", "api.aws.hci.ic.gov", // aws-iso-f
}

// CheckEndpoint returns an error unless endpoint is an http or https URL
// whose host is not an AWS one. Main applies it to AWS_ENDPOINT_URL_DYNAMODB:
// tests run against a local engine only, never against DynamoDB itself.
func CheckEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("%s=%q is not an http:// or https:// URL", endpointEnv, endpoint)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	for _, suffix := range awsDNSSuffixes {
		if host == suffix || strings.HasSuffix(host, "."+suffix) {
			return fmt.Errorf("%s=%q is an AWS endpoint (%s); tests run against a local engine only, never against AWS",
				endpointEnv, endpoint, suffix)
		}
	}
	return nil
}

// Client returns a client for the test engine, or fails t saying what is
// missing.
func (h Harness) Client(t testing.TB) *dynamodb.Client {
	t.Helper()
	if !mainRan {
		t.Fatalf("%[1]s: the package's TestMain does not call %[1]s.Main, which finds the engine and keeps tests off AWS:\n"+
			"  func TestMain(m *testing.M) { os.Exit(%[1]s.Main(m)) }", h.Name)
	}
	endpoint := os.Getenv(endpointEnv)
	if err := CheckEndpoint(endpoint); err != nil {
		t.Fatalf("%s: %v", h.Name, err)
	}
	return dynamodb.New(newClient(endpoint).Options(), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Deserialize.Add(h.explainUnknownOperation(), middleware.Before)
		})
	})
}

// newClient builds a client for endpoint from explicit dummy credentials
// and region, whatever the environment says.
func newClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       testRegion,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(dummyAccessKeyID, dummySecretAccessKey, ""),
	})
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// TableName returns a table name unique to t, so that tests can run in
// parallel, and deletes the table when t ends.
func TableName(t testing.TB, client *dynamodb.Client) string {
	t.Helper()
	name := unsafeChars.ReplaceAllString(t.Name(), "-")
	if len(name) > 200 {
		name = name[:200]
	}
	name = "t-" + name + "-" + strings.ToLower(rand.Text()[:8])
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
	})
	return name
}

// WaitActive waits until table is ACTIVE. CreateTable answers while the
// table is CREATING, as DynamoDB does, and a call before then is refused
// with ResourceNotFoundException; dynalite's CREATING lasts a timer's tick,
// which a busy machine stretches. It polls every 50ms: the SDK waiter's
// default first pause is 20s, which a test that catches CREATING once
// spends idle.
func WaitActive(t testing.TB, c dynamodb.DescribeTableAPIClient, table string) {
	t.Helper()
	w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, time.Second
	})
	if err := w.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: &table}, time.Minute); err != nil {
		t.Fatalf("ddbtest: table %s: %v", table, err)
	}
}
