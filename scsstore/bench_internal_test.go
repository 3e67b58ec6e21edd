package scsstore

import (
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// The price of skipping a write: deciding that a session of several keys,
// encoded again by gob in another map order, did not change.
func BenchmarkUnchanged(b *testing.B) {
	store, err := New(Config{Client: &dynamodb.Client{}, Table: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(24 * time.Hour).UTC()
	values := map[string]any{"user": "USER#alice", "createdAt": int64(1796040000000), "csrf": "x7Yq", "flash": "", "theme": "dark"}
	stored, _ := scs.GobCodec{}.Encode(deadline, values)
	store.records.end("pk", store.records.begin(), state{known: true, data: stored, expires: deadline.Unix()})
	encodings := make([][]byte, 16)
	for i := range encodings {
		encodings[i], _ = scs.GobCodec{}.Encode(deadline, values)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if !store.unchanged("pk", encodings[i%len(encodings)], deadline.Unix()) {
			b.Fatal("an unchanged session counted as changed")
		}
	}
}
