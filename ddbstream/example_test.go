package ddbstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbstream"
)

// A Lambda function's main wires the handler to the table's stream.
func Example_lambda() {
	h, err := ddbstream.New(ddbstream.Config{
		Cleanup: func(ctx context.Context, s ddbsession.Session) error {
			// Delete what the app keeps per session; must be idempotent.
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(h.Handle)
}

// The handler calls cleanup for the TTL deletion of a session item, and
// for nothing else in the batch.
func Example() {
	h, err := ddbstream.New(ddbstream.Config{
		Cleanup: func(ctx context.Context, s ddbsession.Session) error {
			fmt.Println("expired:", s.ID, s.User.PK, s.User.SK, s.CreatedAt.UTC().Format(time.RFC3339Nano), s.ExpiresAt.UTC().Format(time.RFC3339))
			return nil
		},
	})
	if err != nil {
		panic(err)
	}

	// Two deletions of the same session item: first by TTL, then (as if)
	// by the application, which has no userIdentity.
	const event = `{"Records": [
	  {
	    "eventID": "c4ca4238a0b923820dcc509a6f75849b",
	    "eventName": "REMOVE",
	    "eventVersion": "1.1",
	    "eventSource": "aws:dynamodb",
	    "awsRegion": "us-east-1",
	    "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
	    "dynamodb": {
	      "ApproximateCreationDateTime": 1796044260,
	      "Keys": {"pk": {"S": "SESSION#q0oZ5Xb1cW"}, "sk": {"S": "SESSION"}},
	      "OldImage": {
	        "pk": {"S": "SESSION#q0oZ5Xb1cW"}, "sk": {"S": "SESSION"},
	        "v": {"N": "1"}, "kind": {"S": "session"},
	        "sid": {"S": "0123456789abcdef0123456789abcdef"},
	        "userPK": {"S": "USER#alice"}, "userSK": {"S": "PROFILE"},
	        "createdAt": {"N": "1796040000250"}, "refreshedAt": {"N": "1796040000250"},
	        "expiresAt": {"N": "1796043600"},
	        "gen": {"N": "0"}, "globalGen": {"N": "0"}, "authAt": {"N": "1796040000250"}
	      },
	      "SequenceNumber": "111100000000000000000001",
	      "SizeBytes": 250,
	      "StreamViewType": "OLD_IMAGE"
	    },
	    "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/app/stream/2026-11-01T00:00:00.000"
	  },
	  {
	    "eventID": "c81e728d9d4c2f636f067f89cc14862c",
	    "eventName": "REMOVE",
	    "eventVersion": "1.1",
	    "eventSource": "aws:dynamodb",
	    "awsRegion": "us-east-1",
	    "dynamodb": {
	      "Keys": {"pk": {"S": "SESSION#q0oZ5Xb1cW"}, "sk": {"S": "SESSION"}},
	      "OldImage": {
	        "pk": {"S": "SESSION#q0oZ5Xb1cW"}, "sk": {"S": "SESSION"},
	        "v": {"N": "1"}, "kind": {"S": "session"},
	        "sid": {"S": "0123456789abcdef0123456789abcdef"},
	        "userPK": {"S": "USER#alice"}, "userSK": {"S": "PROFILE"},
	        "createdAt": {"N": "1796040000250"}, "refreshedAt": {"N": "1796040000250"},
	        "expiresAt": {"N": "1796043600"},
	        "gen": {"N": "0"}, "globalGen": {"N": "0"}, "authAt": {"N": "1796040000250"}
	      },
	      "SequenceNumber": "111100000000000000000002",
	      "SizeBytes": 250,
	      "StreamViewType": "OLD_IMAGE"
	    },
	    "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/app/stream/2026-11-01T00:00:00.000"
	  }
	]}`
	var ev events.DynamoDBEvent
	if err := json.Unmarshal([]byte(event), &ev); err != nil {
		panic(err)
	}
	resp, err := h.Handle(context.Background(), ev)
	fmt.Println("failures:", len(resp.BatchItemFailures), err)
	// Output:
	// expired: 0123456789abcdef0123456789abcdef USER#alice PROFILE 2026-11-30T12:00:00.25Z 2026-11-30T13:00:00Z
	// failures: 0 <nil>
}
