package item

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The layout record is the table's own statement of its layout: the key
// names, the prefixes, the attribute names and the replication mode that
// every Manager, store and command on the table must share, since two that
// differ read and write different items and neither sees the other's
// revocations. CreateTable writes it, and everything that uses the table
// checks its own layout against it at start. It lives under a key that no
// layout setting moves, so that a Manager with another prefix finds it too:
//
//	pk    S  DDBSESSION#LAYOUT
//	sk    S  LAYOUT                  (absent in a hash-only table)
//	v     N  1
//	kind  S  "ddbsession-layout"
//	one attribute per field of the layout, named as in Layout, in lower
//	camel case: partitionKey, sortKey (absent in a hash-only table),
//	sessionPrefix, userSessionsPrefix, ttlAttribute, versionAttribute,
//	credentialAttribute, expiryIndex (absent without one),
//	expiryIndexShards (N) and mrec (BOOL)
const (
	KindLayout = "ddbsession-layout"
	layoutPK   = "DDBSESSION#LAYOUT"
	layoutSort = "LAYOUT"
)

// LayoutKey addresses the layout record.
func (l *Layout) LayoutKey() map[string]types.AttributeValue { return l.Key(layoutPK, layoutSort) }

// layoutFields are the layout's fields as the record holds them: each
// with its name in the record, its name for a reader (the Config field),
// and its value in l.
func layoutFields(l *Layout) []struct{ attr, field, value string } {
	return []struct{ attr, field, value string }{
		{"partitionKey", "PartitionKey", l.PartitionKey},
		{"sortKey", "SortKey", l.SortKey},
		{"sessionPrefix", "SessionPrefix", l.SessionPrefix},
		{"userSessionsPrefix", "UserSessionsPrefix", l.UserSessionsPrefix},
		{"ttlAttribute", "TTLAttribute", l.TTLAttribute},
		{"versionAttribute", "VersionAttribute", l.VersionAttribute},
		{"credentialAttribute", "CredentialAttribute", l.CredentialAttribute},
		{"expiryIndex", "ExpiryIndex", l.ExpiryIndex},
		{"expiryIndexShards", "ExpiryIndexShards", strconv.Itoa(l.ExpiryIndexShards)},
		{"mrec", "MREC", strconv.FormatBool(l.MREC)},
	}
}

// EncodeLayout is l's layout record.
func (l *Layout) EncodeLayout() map[string]types.AttributeValue {
	av := l.LayoutKey()
	av[AttrVersion] = Num(StateFormat)
	av[AttrKind] = Str(KindLayout)
	for _, f := range layoutFields(l) {
		switch {
		case f.value == "":
		case f.attr == "expiryIndexShards":
			av[f.attr] = &types.AttributeValueMemberN{Value: f.value}
		case f.attr == "mrec":
			av[f.attr] = &types.AttributeValueMemberBOOL{Value: l.MREC}
		default:
			av[f.attr] = Str(f.value)
		}
	}
	return av
}

// DecodeLayout reads a layout record: the layout it records (HashOnly
// from the absence of a sort key). An item of another form is an error.
func DecodeLayout(av map[string]types.AttributeValue) (Layout, error) {
	if err := checkKind(av, KindLayout); err != nil {
		return Layout{}, err
	}
	d := decoder{av: av}
	l := Layout{
		PartitionKey:        d.str("partitionKey", true),
		SortKey:             d.str("sortKey", false),
		SessionPrefix:       d.str("sessionPrefix", true),
		UserSessionsPrefix:  d.str("userSessionsPrefix", true),
		TTLAttribute:        d.str("ttlAttribute", true),
		VersionAttribute:    d.str("versionAttribute", true),
		CredentialAttribute: d.str("credentialAttribute", true),
		ExpiryIndex:         d.str("expiryIndex", false),
		ExpiryIndexShards:   int(d.num("expiryIndexShards")),
	}
	l.HashOnly = l.SortKey == ""
	if b, ok := av["mrec"].(*types.AttributeValueMemberBOOL); ok {
		l.MREC = b.Value
	} else {
		d.fail("%q is not a Boolean", "mrec")
	}
	return l, d.err
}

// LayoutMismatch is a layout that differs from the one its table records.
type LayoutMismatch struct {
	Table string
	// Fields name each field that differs, with the table's value and
	// this layout's, as "Layout.SessionPrefix: the table's "SESSION#",
	// this "S#"".
	Fields []string
}

func (m *LayoutMismatch) Error() string {
	return fmt.Sprintf("table %q records another layout than this one (%s): every Manager, store and command on a table must use the layout it was created with",
		m.Table, strings.Join(m.Fields, "; "))
}

// CompareLayout returns a *LayoutMismatch if l differs from recorded,
// which table records, and nil if they agree.
func (l *Layout) CompareLayout(table string, recorded Layout) error {
	var diffs []string
	ours, theirs := layoutFields(l), layoutFields(&recorded)
	for i, f := range ours {
		if f.value != theirs[i].value {
			diffs = append(diffs, fmt.Sprintf("Layout.%s: the table's %q, this %q", f.field, theirs[i].value, f.value))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return &LayoutMismatch{Table: table, Fields: diffs}
}
