package ddbtest_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// Secrets.Find finds a registered credential, its token and their digests
// anywhere in a text: alone, inside a word, in a table key, quoted; and
// nothing else.
func TestSecretsFind(t *testing.T) {
	t.Parallel()
	const token, userPart = "H6QCH3KRBBDZQDLWISHNJOXVHH", "VVNFUiNhbGljZQ"
	var s ddbtest.Secrets
	s.Add("a session cookie", token+"."+userPart)
	s.Add("a short one", "tooshort")
	sum := sha256.Sum256([]byte(token))
	for _, tc := range []struct {
		name, text string
		hits       int
	}{
		{"the credential", `msg="cookie" value=` + token + "." + userPart, 1}, // the credential, and its token, on one line
		{"the token in a word", "xx" + token + "yy", 1},
		{"the token and its digest", token + " " + hex.EncodeToString(sum[:]), 2},
		{"the token quoted", `err="bad token \"` + token + `\""`, 1},
		{"the session key", "pk=SESSION#" + base64.RawURLEncoding.EncodeToString(sum[:]), 1},
		{"the hex digest", "digest " + hex.EncodeToString(sum[:]), 1},
		{"the base64 digest", "digest " + base64.RawStdEncoding.EncodeToString(sum[:]), 1},
		{"a prefix of the token", token[:20], 0},
		{"the user part alone", userPart, 0},
		{"a short value", "tooshort tooshort", 0},
		{"another token", "ZZQCH3KRBBDZQDLWISHNJOXVHH", 0},
	} {
		hits := s.Find("first line\n" + tc.text + "\nlast line")
		if len(hits) != tc.hits {
			t.Errorf("%s: %d hits (%+v), want %d", tc.name, len(hits), hits, tc.hits)
		}
		for _, h := range hits {
			if h.Line != tc.text {
				t.Errorf("%s: the hit's line is %q, want %q", tc.name, h.Line, tc.text)
			}
		}
	}
}

// The harness: rounds on a virtual clock that only the soak moves on;
// a call held past its deadline fails at exactly its deadline; and the
// same seed gives each request of each client the same faults, in
// whichever order the clients come.
func TestSoakHarness(t *testing.T) {
	t.Setenv("SOAK_SEED", "2718")
	t.Setenv("SOAK_ROUNDS", "")
	cfg := ddbtest.SoakConfig{Rounds: 3, HeapSlack: 8 << 20, Faults: []ddbtest.FaultRate{{ddbtest.FaultThrottle, 0.6}, {ddbtest.FaultHang, 0.2}}}
	outcomes := map[bool]string{}
	for _, reversed := range []bool{false, true} {
		var got []string
		ddbtest.Soak(t, cfg, func(s *ddbtest.SoakRun) string {
			app, table := harnessApp(t, s)
			clients := []*http.Client{app.Client(false), app.Client(true)}
			start := s.Now()
			results := make([][]string, len(clients))
			s.Play(len(clients), func(device, round int) {
				if reversed {
					device = len(clients) - 1 - device
				}
				for range 5 {
					results[device] = append(results[device], harnessGet(t, app, clients[device]))
				}
			}, func(round int) { time.Sleep(time.Minute) })
			// The clock moves on by the sleeps, and by the backoff of
			// the throttled calls, the same in both runs.
			elapsed := s.Now().Sub(start)
			if elapsed < time.Duration(s.Rounds)*time.Minute {
				t.Errorf("%d rounds, each followed by a minute's sleep, took %v of the app's clock", s.Rounds, elapsed)
			}
			if !s.Warmup {
				got = append(append(results[0], results[1]...), elapsed.String())
			}

			// Faults off, a call takes no virtual time: the clock stands
			// still while anything works or waits for the engine.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			began := time.Now()
			if _, err := s.EngineClient().GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: harnessKey("k")}); err != nil {
				t.Errorf("a GetItem without faults: %v", err)
			}
			if d := time.Since(began); d != 0 {
				t.Errorf("a GetItem without faults took %v of the virtual clock, want none", d)
			}
			return fmt.Sprintf("  outcomes %v\n", results)
		})
		outcomes[reversed] = strings.Join(got, " ")
	}
	if outcomes[false] != outcomes[true] || outcomes[false] == "" {
		t.Errorf("the same seed, the clients in the other order, other faults:\n%s\n%s", outcomes[false], outcomes[true])
	}
	if !strings.Contains(outcomes[false], "throttled") || !strings.Contains(outcomes[false], "ok") {
		t.Errorf("with 60%% throttled attempts, the outcomes are all alike: %s", outcomes[false])
	}
}

// TestSoakPastDeadline: a call held past its deadline fails at that
// deadline on the virtual clock, having reached the engine (a slow
// answer) or not (a hang).
func TestSoakPastDeadline(t *testing.T) {
	t.Setenv("SOAK_ROUNDS", "1")
	for _, fault := range []ddbtest.Fault{ddbtest.FaultHangPastDeadline, ddbtest.FaultSlowPastDeadline} {
		t.Run(string(fault), func(t *testing.T) {
			ddbtest.Soak(t, ddbtest.SoakConfig{HeapSlack: 8 << 20, Faults: []ddbtest.FaultRate{{fault, 1}}}, func(s *ddbtest.SoakRun) string {
				_, table := harnessApp(t, s)
				client := s.Client()
				s.Play(1, func(int, int) {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					began := time.Now()
					_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: harnessKey("written")})
					if !errors.Is(err, context.DeadlineExceeded) || time.Since(began) != 2*time.Second {
						t.Errorf("a PutItem held past its deadline: %v after %v, want the deadline after 2s", err, time.Since(began))
					}
				}, nil)
				out, err := s.EngineClient().GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, Key: harnessKey("written"), ConsistentRead: aws.Bool(true)})
				if err != nil {
					t.Fatal(err)
				}
				if applied := out.Item != nil; applied != (fault == ddbtest.FaultSlowPastDeadline) {
					t.Errorf("the held PutItem applied: %v, want %v", applied, !applied)
				}
				if attempts, applied := s.Faults.KeyAttempts("PutItem", "written"); attempts != 0 || applied != 0 {
					t.Errorf("a PutItem's attempts counted by key: %d, %d; want none (a PutItem has no Key)", attempts, applied)
				}
				return ""
			})
		})
	}
}

// harnessApp serves GET /get, a GetItem through the front, on a table of
// the run's, which it creates.
func harnessApp(t *testing.T, s *ddbtest.SoakRun) (*ddbtest.SoakApp, string) {
	table := s.Table()
	_, err := s.EngineClient().CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            &table,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	ddbtest.WaitActive(t, s.EngineClient(), table)
	client := s.Client()
	app := s.App(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Long enough for four throttled attempts and their backoff.
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		_, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: harnessKey("k")})
		if _, throttled := errors.AsType[*types.ProvisionedThroughputExceededException](err); throttled || strings.Contains(fmt.Sprint(err), "Throttling") {
			io.WriteString(w, "throttled")
			return
		}
		if err != nil {
			io.WriteString(w, "failed: "+err.Error())
			return
		}
		io.WriteString(w, "ok")
	}), true)
	return app, table
}

func harnessGet(t *testing.T, app *ddbtest.SoakApp, c *http.Client) string {
	res, err := c.Get(app.URL + "/get")
	if err != nil {
		t.Error(err)
		return ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

func harnessKey(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
}
