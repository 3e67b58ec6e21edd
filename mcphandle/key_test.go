package mcphandle

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessiontest"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// Two instances that create the table's key at once end up with one: the
// one whose write lost reads the winner's.
func TestKeyCreatedOnce(t *testing.T) {
	t.Parallel()
	client := ddbsessiontest.Client(t)
	table := ddbsessiontest.TableName(t, client)
	m, err := ddbsession.New(ddbsession.Config[struct{}]{Client: client, Table: table, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	layout := ddbsession.Layout{PartitionKey: "pk", SortKey: "sk"}
	slow := ddbtest.NewProbe(client)
	paused, resume := make(chan struct{}), make(chan struct{})
	slow.Before = func(_ context.Context, op string, _ any) {
		if op == "PutItem" {
			close(paused)
			<-resume
		}
	}
	a, b := newHandleKey(slow, table, layout), newHandleKey(client, table, layout)
	got := make(chan []byte)
	go func() {
		key, err := a.get(context.Background(), true)
		if err != nil {
			t.Error(err)
		}
		got <- key
	}()
	<-paused // a found no key, and is about to write its own
	keyB, err := b.get(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	close(resume)
	if keyA := <-got; !bytes.Equal(keyA, keyB) || len(keyA) != 32 {
		t.Errorf("the racing instances' keys differ: %x, %x", keyA, keyB)
	}
	if calls := slow.Calls(); calls["GetItem"] != 2 || calls["PutItem"] != 1 {
		t.Errorf("the losing instance's calls: %v, want its read, its write, and a read of the winner's key", calls)
	}
}

// A handle opens for the caller it was sealed for alone, and any change
// to it, or another key, fails.
func TestSealOpensForItsCallerAlone(t *testing.T) {
	t.Parallel()
	key, other := randomKey(), randomKey()
	token := strings.Repeat("ABCDEFGHIJKLM", 2)
	h := seal(key, token, "USER#alice\x00PROFILE\x00")
	if len(h) != maxHandle {
		t.Errorf("handle of %d characters, want maxHandle (%d)", len(h), maxHandle)
	}
	if got, ok := openHandle(key, h, "USER#alice\x00PROFILE\x00"); !ok || got != token {
		t.Errorf("open by its caller = %q, %v; want the token", got, ok)
	}
	if h2 := seal(key, token, "USER#alice\x00PROFILE\x00"); h2 == h {
		t.Errorf("two seals of one token are the same handle")
	}
	for name, c := range map[string]struct {
		key       []byte
		h, caller string
	}{
		"another caller":      {key, h, "USER#bob\x00PROFILE\x00"},
		"another client":      {key, h, "USER#alice\x00PROFILE\x00app"},
		"another key":         {other, h, "USER#alice\x00PROFILE\x00"},
		"a character changed": {key, "B" + h[1:], "USER#alice\x00PROFILE\x00"},
		"cut":                 {key, h[:40], "USER#alice\x00PROFILE\x00"},
		"not base64url":       {key, strings.Repeat("!", 72), "USER#alice\x00PROFILE\x00"},
		"padded":              {key, h + "==", "USER#alice\x00PROFILE\x00"},
		"empty":               {key, "", "USER#alice\x00PROFILE\x00"},
	} {
		if got, ok := openHandle(c.key, c.h, c.caller); ok {
			t.Errorf("%s: opened to %q", name, got)
		}
	}
}
