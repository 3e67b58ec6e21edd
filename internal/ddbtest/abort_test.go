package ddbtest_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// A client that goes away mid-request, as the AWS SDK does when a
// request's context times out, must not take the engine down for the rest
// of the run (dynalite rethrows such a request's error unless
// dynalite.js catches it).
func TestEngineSurvivesAbortedRequests(t *testing.T) {
	client := ddbtest.Client(t)
	u, err := url.Parse(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// A request that promises a longer body than it sends, then hangs up.
		conn.Write([]byte("POST / HTTP/1.1\r\nHost: " + u.Host + "\r\n" +
			"X-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Type: application/x-amz-json-1.0\r\n" +
			"Content-Length: 1000\r\n\r\n{}"))
		time.Sleep(50 * time.Millisecond)
		conn.Close()
	}
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("the engine after aborted requests: %v", err)
	}
}
