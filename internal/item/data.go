package item

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A session's data over MaxData bytes lives apart from the session item, in
// a data item of its own, which only a request that asks for the data
// reads: a request that does not costs what it costs without. The session
// item then has no AttrAppData, and AttrDataApart equals its AttrDataRev,
// which names the data item, one per revision, so that two racing writers never
// write the same item, and the one whose revision the session item took is
// the data:
//
//	pk       S  the session's partition key   (hash-only: <session pk>#DATA#<rev>)
//	sk       S  DATA#<rev, base 36>           (absent in a hash-only table)
//	v        N  1
//	kind     S  "session-data"
//	appData  S  the data, JSON text
//	<ttl>    N  the end of the session's absolute lifetime, epoch seconds
//
// Nothing else refers to it: its key is derived from the token's digest,
// as the session item's is, and a data item outlives its session only
// until its TTL, unreadable, since reading it takes the session item's
// revision. Deleting the session item deletes it too.
const (
	KindData      = "session-data"
	AttrDataApart = "dataApart"
	dataSort      = "DATA#"
)

// MaxDataApart bounds a session's data kept apart, JSON text: 64 KiB, 16
// read units to read, 64 write units to write.
const MaxDataApart = 64 << 10

// DataKey addresses the data item of revision rev of the session under
// sessionPK.
func (l *Layout) DataKey(sessionPK string, rev int64) map[string]types.AttributeValue {
	sk := dataSort + strconv.FormatInt(rev, 36)
	if l.HashOnly {
		return l.Key(sessionPK+"#"+sk, "")
	}
	return l.Key(sessionPK, sk)
}

// EncodeData is the data item of revision rev of the session under
// sessionPK, holding data, kept until until.
func (l *Layout) EncodeData(sessionPK string, rev int64, data string, until time.Time) map[string]types.AttributeValue {
	av := l.DataKey(sessionPK, rev)
	av[AttrVersion] = Num(StateFormat)
	av[AttrKind] = Str(KindData)
	av[AttrAppData] = Str(data)
	av[l.TTLAttribute] = Num(until.Unix())
	return av
}

// DecodeData reads a data item's data; nil av is ErrMalformed too, which
// its reader tells apart.
func DecodeData(av map[string]types.AttributeValue) (string, error) {
	if err := checkKind(av, KindData); err != nil {
		return "", err
	}
	d := decoder{av: av}
	data := d.str(AttrAppData, true)
	return data, d.err
}
