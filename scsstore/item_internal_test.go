package scsstore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
	"github.com/ddbsession/ddbsession/internal/item"
)

// avCompare lets cmp look into the SDK's attribute value types.
var avCompare = cmp.AllowUnexported(types.AttributeValueMemberS{}, types.AttributeValueMemberN{}, types.AttributeValueMemberB{})

func scsToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func mustLayout(t *testing.T, l ddbsession.Layout, prefix string) itemLayout {
	t.Helper()
	resolved, err := ddbitem.Resolve(l)
	if err != nil {
		t.Fatal(err)
	}
	return itemLayout{table: "app", Layout: resolved, prefix: prefix}
}

// The item is written in the form docs/item-format.md documents, and read
// back, in a table with a sort key and in a hash-only one with another TTL
// attribute and prefix.
func TestItemFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		layout ddbsession.Layout
		prefix string
		want   func(pk string) map[string]types.AttributeValue
	}{
		{"default", ddbsession.Layout{}, "SCS#", func(pk string) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{
				"pk": str(pk), "sk": str("SCS"), "v": num(1), "kind": str("scs-session"),
				"data": &types.AttributeValueMemberB{Value: []byte("gob")}, "expiresAt": num(1796044200),
			}
		}},
		{"hash-only", ddbsession.Layout{HashOnly: true, TTLAttribute: "ttl"}, "S#", func(pk string) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{
				"pk": str(pk), "v": num(1), "kind": str("scs-session"),
				"data": &types.AttributeValueMemberB{Value: []byte("gob")}, "ttl": num(1796044200),
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := mustLayout(t, tc.layout, tc.prefix)
			token := scsToken()
			pk := l.pk(token)
			sum := sha256.Sum256([]byte(token))
			if want := tc.prefix + base64.RawURLEncoding.EncodeToString(sum[:]); pk != want {
				t.Fatalf("pk = %q, want %q", pk, want)
			}
			s := session{data: []byte("gob"), expires: 1796044200}
			av := l.encode(pk, s)
			if diff := cmp.Diff(tc.want(pk), av, avCompare); diff != "" {
				t.Errorf("encode (-documented +got):\n%s", diff)
			}
			got, ok := l.decode(av)
			if !ok {
				t.Fatal("decode of an encoded item: not ok")
			}
			if diff := cmp.Diff(s, got, cmp.AllowUnexported(session{})); diff != "" {
				t.Errorf("decode (-want +got):\n%s", diff)
			}
		})
	}
}

// decode takes live scs session items alone: not a tombstone, not a core
// session item, not one it cannot read in full.
func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	l := mustLayout(t, ddbsession.Layout{}, defaultPrefix)
	for name, mutate := range rejected {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			av := l.encode(l.pk(scsToken()), session{data: []byte("x"), expires: 1796044200})
			mutate(av)
			if s, ok := l.decode(av); ok {
				t.Errorf("decode = %+v, true; want not ok", s)
			}
		})
	}
	if s, ok := l.decode(nil); ok {
		t.Errorf("decode of no item = %+v, true", s)
	}
}

// rejected are the ways to spoil a live item for a reader.
var rejected = map[string]func(map[string]types.AttributeValue){
	"tombstone": func(av map[string]types.AttributeValue) {
		av["kind"] = str("scs-destroyed")
		delete(av, "data")
	},
	"core session":  func(av map[string]types.AttributeValue) { av["kind"] = str("session") },
	"no kind":       func(av map[string]types.AttributeValue) { delete(av, "kind") },
	"no data":       func(av map[string]types.AttributeValue) { delete(av, "data") },
	"string data":   func(av map[string]types.AttributeValue) { av["data"] = str("x") },
	"no expiry":     func(av map[string]types.AttributeValue) { delete(av, "expiresAt") },
	"string expiry": func(av map[string]types.AttributeValue) { av["expiresAt"] = str("1796044200") },
	"fractional":    func(av map[string]types.AttributeValue) { av["expiresAt"] = &types.AttributeValueMemberN{Value: "1.5"} },
	"out of range": func(av map[string]types.AttributeValue) {
		av["expiresAt"] = &types.AttributeValueMemberN{Value: "1e30"}
	},
	"other version":  func(av map[string]types.AttributeValue) { av["v"] = num(2) },
	"no version":     func(av map[string]types.AttributeValue) { delete(av, "v") },
	"string version": func(av map[string]types.AttributeValue) { av["v"] = str("1") },
}

// This package's codec and the root module's internal/item, which the
// ddbsession command reads scs items with, define one format: the same
// keys, items, conditions and token check, and each reads what the other
// writes. Neither can change alone.
func TestItemMatchesInternalItem(t *testing.T) {
	t.Parallel()
	if kindLive != item.KindSCS || kindDestroyed != item.KindSCSDestroyed || attrData != item.AttrData ||
		attrVersion != item.AttrVersion || attrKind != item.AttrKind || formatVersion != item.StateFormat ||
		defaultPrefix != item.DefaultSCSPrefix {
		t.Errorf("constants differ: kinds %q %q, data %q, v %q, kind %q, version %d, prefix %q",
			item.KindSCS, item.KindSCSDestroyed, item.AttrData, item.AttrVersion, item.AttrKind, item.StateFormat, item.DefaultSCSPrefix)
	}
	for _, tc := range []struct {
		name   string
		layout ddbsession.Layout
		prefix string
	}{
		{"default", ddbsession.Layout{}, defaultPrefix},
		{"hash-only", ddbsession.Layout{HashOnly: true, TTLAttribute: "ttl"}, "S#"},
		{"own names", ddbsession.Layout{PartitionKey: "PK", SortKey: "SK", TTLAttribute: "exp", SessionPrefix: "S3SSION#"}, "APP#SCS#"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ours := mustLayout(t, tc.layout, tc.prefix)
			resolved, err := item.Layout(tc.layout).WithDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(item.Layout(ours.Layout), resolved); diff != "" {
				t.Errorf("ddbitem.Resolve and item.Layout.WithDefaults disagree (-ddbitem +item):\n%s", diff)
			}
			theirs := item.SCSLayout{Layout: resolved, Prefix: tc.prefix}

			token := scsToken()
			pk := ours.pk(token)
			if want := theirs.PK(token); pk != want {
				t.Fatalf("pk = %q, item's %q", pk, want)
			}
			if diff := cmp.Diff(theirs.Key(pk), ours.key(pk), avCompare); diff != "" {
				t.Errorf("key (-item +scsstore):\n%s", diff)
			}
			s := session{data: []byte("gob"), expires: 1796044200}
			theirItem := theirs.Encode(pk, item.SCSSession{Data: s.data, ExpiresAt: time.Unix(s.expires, 0)})
			if diff := cmp.Diff(theirItem, ours.encode(pk, s), avCompare); diff != "" {
				t.Errorf("encode (-item +scsstore):\n%s", diff)
			}
			if got, ok := ours.decode(theirItem); !ok || !cmp.Equal(got, s, cmp.AllowUnexported(session{})) {
				t.Errorf("decode of item's encoding = %+v, %v; want %+v", got, ok, s)
			}
			if got, err := theirs.Decode(ours.encode(pk, s)); err != nil || got.ExpiresAt.Unix() != s.expires || string(got.Data) != string(s.data) {
				t.Errorf("item's Decode of scsstore's encoding = %+v, %v", got, err)
			}
			for name, mutate := range rejected {
				av := ours.encode(pk, s)
				mutate(av)
				_, ok := ours.decode(av)
				if _, err := theirs.Decode(av); (err == nil) != ok {
					t.Errorf("%s: scsstore decodes it %v, item's Decode says %v", name, ok, err)
				}
			}

			commit := ours.commit(pk, s)
			w := theirs.CommitCondition()
			if diff := cmp.Diff(writes{Condition: w.Condition, Names: w.Names, Values: w.Values}, writesOf(nil, commit.ConditionExpression, commit.ExpressionAttributeNames, commit.ExpressionAttributeValues), avCompare); diff != "" {
				t.Errorf("commit condition (-item +scsstore):\n%s", diff)
			}
			if diff := cmp.Diff(theirItem, commit.Item, avCompare); diff != "" {
				t.Errorf("committed item (-item +scsstore):\n%s", diff)
			}
			destroy := ours.destroy(pk, 1796047800)
			w = theirs.Destroy(time.Unix(1796047800, 0))
			if diff := cmp.Diff(writes(w), writesOf(destroy.UpdateExpression, destroy.ConditionExpression, destroy.ExpressionAttributeNames, destroy.ExpressionAttributeValues), avCompare); diff != "" {
				t.Errorf("destroy (-item +scsstore):\n%s", diff)
			}
			if diff := cmp.Diff(theirs.Key(pk), destroy.Key, avCompare); diff != "" {
				t.Errorf("destroy's key (-item +scsstore):\n%s", diff)
			}
			get := ours.get(pk)
			if diff := cmp.Diff(theirs.Key(pk), get.Key, avCompare); diff != "" || !aws.ToBool(get.ConsistentRead) {
				t.Errorf("get: consistent %v, key (-item +scsstore):\n%s", aws.ToBool(get.ConsistentRead), diff)
			}
			for _, in := range []*string{commit.TableName, destroy.TableName, get.TableName} {
				if aws.ToString(in) != "app" {
					t.Errorf("a call names table %q, want app", aws.ToString(in))
				}
			}
		})
	}

	good := scsToken()
	sum := sha256.Sum256([]byte(good))
	for _, token := range append(tokenShapes(good), good, base64.RawURLEncoding.EncodeToString(sum[:])) {
		if validToken(token) != item.ValidSCSToken(token) {
			t.Errorf("validToken(%q) = %v, item.ValidSCSToken %v", token, validToken(token), item.ValidSCSToken(token))
		}
	}
}

// writes is item.Writes, field for field, for comparing expressions.
type writes struct {
	Update, Condition string
	Names             map[string]string
	Values            map[string]types.AttributeValue
}

func writesOf(update, condition *string, names map[string]string, values map[string]types.AttributeValue) writes {
	return writes{Update: aws.ToString(update), Condition: aws.ToString(condition), Names: names, Values: values}
}

// New refuses a layout whose key or TTL attribute takes the name of one of
// the item's own attributes, which the item would then overwrite.
func TestNewRefusesTheItemsNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{attrVersion, attrKind, attrData} {
		for field, l := range map[string]ddbsession.Layout{
			"PartitionKey": {PartitionKey: name},
			"SortKey":      {SortKey: name},
			"TTLAttribute": {TTLAttribute: name},
		} {
			_, err := New(Config{Client: &dynamodb.Client{}, Table: "app", Layout: l})
			if err == nil || !strings.Contains(err.Error(), "Config.Layout") || !strings.Contains(err.Error(), `"`+name+`"`) {
				t.Errorf("Layout.%s %q: New: %v, want an error naming Config.Layout and %q", field, name, err, name)
			}
		}
	}
}

// tokenShapes are strings near an scs token that are not one.
func tokenShapes(good string) []string {
	// The last character of a 43-character token carries 4 bits and 2
	// spare ones; "B" sets a spare bit.
	return []string{"", good[:42], good + "A", good[:42] + "=", strings.Repeat("+", 43),
		good[:42] + " ", good[:42] + "B", rand.Text(), strings.Repeat("A", 1<<10)}
}

func TestValidToken(t *testing.T) {
	t.Parallel()
	good := scsToken()
	if !validToken(good) {
		t.Fatalf("validToken(%q) = false for a token as scs makes them", good)
	}
	sum := sha256.Sum256([]byte(good))
	if hashed := base64.RawURLEncoding.EncodeToString(sum[:]); !validToken(hashed) {
		t.Errorf("validToken rejects scs's HashTokenInStore form %q", hashed)
	}
	for _, token := range tokenShapes(good) {
		if validToken(token) {
			t.Errorf("validToken(%q) = true", token)
		}
	}
}

// Whatever the cookie holds, validToken accepts only strings that decode
// to 32 bytes and encode back to themselves.
func FuzzValidToken(f *testing.F) {
	f.Add(scsToken())
	f.Add("")
	f.Add(strings.Repeat("A", 43))
	f.Fuzz(func(t *testing.T, s string) {
		if !validToken(s) {
			return
		}
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) != 32 || base64.RawURLEncoding.EncodeToString(b) != s {
			t.Errorf("validToken(%q) = true, but it is not the encoding of 32 bytes", s)
		}
	})
}
