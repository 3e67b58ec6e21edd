// Package decide reads the items that decide whether sessions stand, and
// decides: the one place that does. A request, a login, a List, a session
// limit's count, a data write's check, scsstore's and mcpsession's loads
// all make one Read: it reads every item that decides them (sessions, in
// MREC their end records, the user item, in MREC the user's revocation
// item, a session limit's slots) in one strongly consistent round trip,
// files them by key, keeps this instance's copy of the table's global
// revocation generation (shared.go), and hands back one Facts, which
// Judge decides each session against.
package decide

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// Reader makes Reads of one table. It is safe for concurrent use.
type Reader struct {
	Calls
	Layout item.Layout
	// Load reads a user kept outside the table (Config.LoadUser) into out,
	// and returns the user's sessions version, or false for a user that
	// does not exist; nil for user items in the table.
	Load func(ctx context.Context, pk, sk string, out any) (version int64, found bool, err error)
	// Warn, if set, is told of a session item in a format this release
	// cannot read, which counts as absent.
	Warn func(ctx context.Context, err error)
	// OnRecord, if set, is told that the Reader recorded its layout in a
	// table that had no record.
	OnRecord func(ctx context.Context)

	shared shared
	pairs  sync.Pool // of *pairRead: the hot path's input
}

// New returns a Reader of calls' table, of layout, whose copy of the
// shared items is read again once it is within old on mono, the monotonic
// clock (nanoseconds, never 0).
func New(calls Calls, layout item.Layout, within time.Duration, mono func() int64) *Reader {
	return &Reader{Calls: calls, Layout: layout, shared: shared{within: within, mono: mono}}
}

// Query says what a Read reads.
type Query struct {
	// Session, or Sessions, are the partition keys of the session items
	// to read, each with its end record in MREC: one alone (a request's),
	// or a list (List's, a session limit's count).
	Session  string
	Sessions []string
	// Ends are the partition keys of sessions whose end records alone to
	// read (MREC): sessions the caller has read already.
	Ends []string
	// UserPK and UserSK name the user to read with them; "" for none.
	UserPK, UserSK string
	// OfSession reads, instead, the user of Session, after it, in a
	// second round trip: for a credential that does not name its user,
	// and users kept outside the table. Then, if set, says whether the
	// session is worth that read.
	OfSession bool
	Then      func(item.Session) bool
	// Slots reads the user's slots item too (a login under a session
	// limit), and SlotsAlone the slots item without the user item (a
	// session limit's claim reading again).
	Slots, SlotsAlone bool
	// Into is what Load decodes the user into; a user item of the table
	// is left to the caller to decode (Facts.User).
	Into any
}

// Facts are what a Read found, filed by key.
type Facts struct {
	// many are the sessions the Read asked for, in its order, each with
	// what was found under its keys; one is the session of a Read that
	// asked for one alone (the hot path's), which allocates nothing.
	many   []entry
	one    [1]entry
	single bool
	byPK   map[string]int // the index in many by partition key, for many
	// User is the user item (nil for none, or a user of Load), and
	// UserFound whether the user exists, in the table or to Load.
	User      map[string]types.AttributeValue
	UserFound bool
	// Stamp is what a login copies now: the user's stamp, and the global
	// generation as this instance knew it when the Read began, or read it
	// then (a generation learnt later may be of a RevokeEveryone after the
	// credential was read, which the session must not survive).
	Stamp item.Stamp
	// Slots is the user's slots item, read for a session limit.
	Slots item.Slots
	// RevokedAt is when RevokeAll last ended the user's sessions; zero
	// for never (item.AttrRevokedAt).
	RevokedAt time.Time
	// EveryoneAt is when RevokeEveryone last ended every session, as this
	// instance's copy of the global item knew it after the Read; zero for
	// never.
	EveryoneAt time.Time

	global int64 // the generation sessions are judged against: the latest the Read knows
	mrec   bool
}

// entry is what a Read found of one session: the session item, decoded
// (found false for none, a void, or one this release cannot read), whether
// a session limit's void stands under its key, and whether its end record
// is there (MREC).
type entry struct {
	pk                  string
	s                   item.Session
	found, void, ended  bool
	item, end           map[string]types.AttributeValue // as read, until filed
	endAsked, sessAsked bool
}

// sessions are the entries of the sessions the Read asked for.
func (f *Facts) sessions() []entry {
	if f.single {
		return f.one[:]
	}
	return f.many
}

func (f *Facts) entry(pk string) *entry {
	all := f.sessions()
	if f.byPK != nil {
		if i, ok := f.byPK[pk]; ok {
			return &all[i]
		}
		return nil
	}
	for i := range all {
		if all[i].pk == pk {
			return &all[i]
		}
	}
	return nil
}

// Session returns the session under partition key pk, if the Read found
// one it can read (not a void).
func (f *Facts) Session(pk string) (item.Session, bool) {
	if e := f.entry(pk); e != nil && e.found {
		return e.s, true
	}
	return item.Session{}, false
}

// Voided reports whether a session limit's void stands under pk.
func (f *Facts) Voided(pk string) bool {
	e := f.entry(pk)
	return e != nil && e.void
}

// Sessions calls yield with each session the Read found, in the order
// asked.
func (f *Facts) Sessions(yield func(pk string, s item.Session) bool) {
	all := f.sessions()
	for i := range all {
		if e := &all[i]; e.found && !yield(e.pk, e.s) {
			return
		}
	}
}

// Global is the global revocation generation that sessions are judged
// against: the latest the Read knew.
func (f *Facts) Global() int64 { return f.global }

// Adopt takes the user of user, the Facts of another Read, to judge the
// sessions of f against: a count of a user's sessions, whose login read
// the user already.
func (f *Facts) Adopt(user *Facts) {
	global := f.Stamp.Global
	f.User, f.UserFound, f.Stamp = user.User, user.UserFound, user.Stamp
	f.Stamp.Global = global
}

// Verdict is how a session stands.
type Verdict int

const (
	Stands Verdict = iota
	// Ended: its end record is there (MREC).
	Ended
	// UserMissing: its user is gone.
	UserMissing
	// EndedEveryone: a RevokeEveryone came after its login.
	EndedEveryone
	// Revoked: a RevokeAll came after its login, its user item was made
	// anew, its credential changed, or the user item has no sessions
	// version.
	Revoked
	// NotHereYet: its login read a revocation that has not reached this
	// instance yet (in MREC, this Region): refused here until it has.
	NotHereYet
)

// Judge says how session s stands, against the user and the end records
// of f (see Judge).
func (f *Facts) Judge(s item.Session) Verdict {
	e := f.entry(s.SessionPK)
	return Judge(s, e != nil && e.ended, f.UserFound, f.Stamp, f.global, f.mrec)
}

// Judge is the one rule: how session s stands, given whether its end
// record is there (ended, MREC), whether its user exists, user's stamp
// now, and the table's global revocation generation now. Every part of
// the stamp is a number compared for equality, never a time. A session of
// release v0.1.0's formats has no stamp of its user's incarnation and
// credential: its revocation version stands for both, as v0.1.0 judged
// it. A user item without a sessions version ends every session, of any
// format: nothing tells its incarnations apart.
func Judge(s item.Session, ended, userFound bool, user item.Stamp, global int64, mrec bool) Verdict {
	switch {
	case s.Stamp.Global > global:
		// A RevokeEveryone this instance has not seen (Read reads the
		// generation again to know), or one that another Region's
		// overtook: refused, but not known to be ended.
		return NotHereYet
	case s.Stamp.Global < global:
		return EndedEveryone
	case ended:
		return Ended
	case !userFound:
		return UserMissing
	case user.User == 0:
		return Revoked
	case s.Stamp.Revocation == user.Revocation && (s.Legacy || s.Stamp.User == user.User && s.Stamp.Credential == user.Credential):
		return Stands
	case mrec && s.Stamp.Revocation > user.Revocation:
		// Versions only rise in a Region (each change adds to them):
		// this login read a RevokeAll still on its way here.
		return NotHereYet
	}
	return Revoked
}

// Read reads what q asks for, and the shared items if this instance's copy
// of them is stale, in one round trip (two with q.OfSession), and files it.
func (r *Reader) Read(ctx context.Context, q Query) (Facts, error) {
	t, err := r.shared.take(false)
	if err != nil {
		return Facts{}, err
	}
	f := Facts{Stamp: item.Stamp{Global: t.gen}, mrec: r.Layout.MREC}
	switch n := len(q.Sessions) + len(q.Ends); {
	case q.Session != "":
		f.one[0], f.single = entry{pk: q.Session, sessAsked: true, endAsked: r.Layout.MREC}, true
	case n > 0:
		f.many = make([]entry, n)
		for i, pk := range q.Sessions {
			f.many[i] = entry{pk: pk, sessAsked: true, endAsked: r.Layout.MREC}
		}
		for i, pk := range q.Ends {
			f.many[len(q.Sessions)+i] = entry{pk: pk, endAsked: r.Layout.MREC}
		}
		if n > 8 {
			f.byPK = make(map[string]int, n)
			for i, e := range f.many {
				f.byPK[e.pk] = i
			}
		}
	}
	u := userRead{pk: q.UserPK, sk: q.UserSK, slots: q.Slots || q.SlotsAlone, item: !q.SlotsAlone && r.Load == nil}
	if q.OfSession {
		u = userRead{}
	}
	shared, err := r.readRound(ctx, &f, &u, r.sharedKeys(t))
	gen, err := r.lead(ctx, t, shared, err)
	if err != nil {
		return Facts{}, err
	}
	if t.lead != nil {
		f.Stamp.Global = gen
	}
	if err := r.file(ctx, &f, &u); err != nil {
		return Facts{}, err
	}
	if q.OfSession {
		if s, ok := f.Session(q.Session); ok && (q.Then == nil || q.Then(s)) {
			u = userRead{pk: s.UserPK, sk: s.UserSK, item: r.Load == nil}
			if u.item {
				if _, err := r.readRound(ctx, &Facts{}, &u, nil); err != nil {
					return Facts{}, err
				}
				if err := r.file(ctx, &f, &u); err != nil {
					return Facts{}, err
				}
			}
		}
	}
	if u.pk != "" && r.Load != nil && !q.SlotsAlone {
		version, ok, err := r.Load(ctx, u.pk, u.sk, q.Into)
		if err != nil {
			return Facts{}, err
		}
		f.UserFound = ok
		f.Stamp.User, f.Stamp.Revocation, f.Stamp.Credential = version, version, 0
	}
	// Sessions are judged against the latest generation this Read knows:
	// its own read's, or the one it waited for.
	if f.global, err = r.wait(ctx, t); err != nil {
		return Facts{}, err
	}
	if t.lead != nil {
		f.global = gen
	}
	f.EveryoneAt = r.shared.everyoneAt()
	all := f.sessions()
	for i := range all {
		if e := &all[i]; e.found && r.shared.mayBeNewer(e.s.Stamp.Global) {
			if f.global, err = r.ReadAgain(ctx); err != nil {
				return Facts{}, err
			}
			r.shared.notFound(e.s.Stamp.Global)
			break
		}
	}
	return f, nil
}

// userRead is a user's part of a round trip: which items to read, and
// what was found of them.
type userRead struct {
	pk, sk                      string // "" for none
	item, slots                 bool   // read the user item (in MREC with the revocation item), the slots item
	asked                       bool   // the user item was read
	user, revocation, slotsItem map[string]types.AttributeValue
}

// readRound reads, in one round trip, the sessions and end records of f
// and the items of u, with extra (the shared items of a lead), and leaves
// what it found in f's entries and in u; it returns the extra items found,
// by id. A session and its user item, the hot path, go through one reused
// input (pairRead), sorted by their partition keys.
func (r *Reader) readRound(ctx context.Context, f *Facts, u *userRead, extra []map[string]types.AttributeValue) (map[string]map[string]types.AttributeValue, error) {
	l := &r.Layout
	u.asked = u.item && u.pk != ""
	sessions := f.sessions()
	if len(sessions) == 1 && sessions[0].sessAsked && u.asked && !u.slots && extra == nil {
		return nil, r.readPair(ctx, &sessions[0], u)
	}
	// One item alone, a GetItem: a session of the first of two reads in
	// turn, or the user of the second.
	if extra == nil && !u.slots && !l.MREC {
		switch {
		case len(sessions) == 1 && sessions[0].sessAsked && !u.asked:
			var err error
			sessions[0].item, err = r.Get(ctx, l.SessionKey(sessions[0].pk))
			return nil, err
		case len(sessions) == 0 && u.asked:
			var err error
			u.user, err = r.Get(ctx, l.Key(u.pk, u.sk))
			return nil, err
		}
	}
	var w wants
	for i := range sessions {
		e := &sessions[i]
		if e.sessAsked {
			w.add(l.SessionKey(e.pk), roleSession, i)
		}
		if e.endAsked {
			w.add(l.EndKey(e.pk), roleEnd, i)
		}
	}
	if u.asked {
		w.add(l.Key(u.pk, u.sk), roleUser, 0)
		if l.MREC {
			w.add(l.RevocationKey(u.pk, u.sk), roleRevocation, 0)
		}
	}
	if u.slots && u.pk != "" {
		w.add(l.SlotsKey(u.pk, u.sk), roleSlots, 0)
	}
	for _, k := range extra {
		w.add(k, roleShared, 0)
	}
	found, err := r.BatchGet(ctx, w.keys)
	if err != nil {
		return nil, err
	}
	var shared map[string]map[string]types.AttributeValue
	for _, av := range found {
		i := r.match(&w, av)
		if i < 0 {
			continue
		}
		switch w.roles[i] {
		case roleSession:
			sessions[w.at[i]].item = av
		case roleEnd:
			sessions[w.at[i]].end = av
		case roleUser:
			u.user = av
		case roleRevocation:
			u.revocation = av
		case roleSlots:
			u.slotsItem = av
		case roleShared:
			if shared == nil {
				shared = map[string]map[string]types.AttributeValue{}
			}
			shared[r.id(av)] = av
		}
	}
	return shared, nil
}

// file decodes what readRound left in f's entries and in u into f: the
// sessions, their ends, the slots, and the user's stamp.
func (r *Reader) file(ctx context.Context, f *Facts, u *userRead) error {
	sessions := f.sessions()
	for i := range sessions {
		e := &sessions[i]
		if av := e.item; av != nil {
			e.item = nil
			if attrS(av, item.AttrKind) == item.KindVoid { // a void is no session
				e.void = true
			} else if s, err := r.Layout.Decode(av, item.KindSession); err != nil {
				if r.Warn != nil {
					r.Warn(ctx, err)
				}
			} else {
				e.s, e.found = s, true
			}
		}
		if av := e.end; av != nil {
			e.end = nil
			ended, err := item.DecodeEnd(av)
			if err != nil {
				return r.Named(fmt.Errorf("a session's end record: %w", err))
			}
			e.ended = ended
		}
	}
	if u.slots {
		var err error
		if f.Slots, err = r.Layout.DecodeSlots(u.slotsItem); err != nil {
			return r.Named(fmt.Errorf("the user's slots item: %w", err))
		}
	}
	if !u.asked {
		return nil
	}
	f.User, f.UserFound = u.user, u.user != nil
	global := f.Stamp.Global
	stamp, err := r.Layout.UserStamp(u.user, u.revocation)
	if err != nil {
		return r.Named(err)
	}
	f.Stamp, f.Stamp.Global = stamp, global
	f.RevokedAt = r.Layout.RevokedAt(u.user, u.revocation)
	return nil
}

// role is what an item read is to a round trip.
type role int

const (
	roleSession role = iota
	roleEnd
	roleUser
	roleRevocation
	roleSlots
	roleShared
)

// wants are the keys a round trip reads, each with its role.
type wants struct {
	keys  []map[string]types.AttributeValue
	roles []role
	at    []int // the entry of a session or an end record
	byID  map[string]int
}

func (w *wants) add(key map[string]types.AttributeValue, ro role, at int) {
	w.keys = append(w.keys, key)
	w.roles = append(w.roles, ro)
	w.at = append(w.at, at)
}

// match returns the index of the key in w that item av is under, or -1.
// A round trip reads a few keys, or up to a few hundred (List, a session
// limit's count), which a map of ids serves.
func (r *Reader) match(w *wants, av map[string]types.AttributeValue) int {
	pk, sk := attrS(av, r.Layout.PartitionKey), attrS(av, r.Layout.SortKey)
	if len(w.keys) > 8 {
		if w.byID == nil {
			w.byID = make(map[string]int, len(w.keys))
			for i, k := range w.keys {
				w.byID[r.id(k)] = i
			}
		}
		if i, ok := w.byID[r.id(av)]; ok {
			return i
		}
		return -1
	}
	for i, k := range w.keys {
		if attrS(k, r.Layout.PartitionKey) == pk && (r.Layout.HashOnly || attrS(k, r.Layout.SortKey) == sk) {
			return i
		}
	}
	return -1
}

// read reads keys in one round trip, by id; for the shared items alone.
func (r *Reader) read(ctx context.Context, keys []map[string]types.AttributeValue) (map[string]map[string]types.AttributeValue, error) {
	found, err := r.BatchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	byID := map[string]map[string]types.AttributeValue{}
	for _, av := range found {
		byID[r.id(av)] = av
	}
	return byID, nil
}

// id names the item of key (or an item, by its key attributes) in the
// table.
func (r *Reader) id(key map[string]types.AttributeValue) string {
	pk := attrS(key, r.Layout.PartitionKey)
	if r.Layout.HashOnly {
		return pk
	}
	return pk + "\x00" + attrS(key, r.Layout.SortKey)
}

// attrS is av's String attribute name, or "".
func attrS(av map[string]types.AttributeValue, name string) string {
	if s, ok := av[name].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// pairRead is the hot path's BatchGetItem input (a session and its user
// item, in MREC with the end record and the revocation item), built once
// and reused: a Read sets its key values, so that the read builds no maps.
// The SDK only reads an input, and is done with it when the call returns.
type pairRead struct {
	in                                             dynamodb.BatchGetItemInput
	sessionPK, userPK, userSK, endPK, revocationPK types.AttributeValueMemberS
}

// readPair reads session e and user u in one BatchGetItem of the pooled
// input, and sorts what it found by partition key: the session's, its end
// record's, the user's, and the revocation item's differ.
func (r *Reader) readPair(ctx context.Context, e *entry, u *userRead) error {
	l := &r.Layout
	p, ok := r.pairs.Get().(*pairRead)
	if !ok {
		p = r.newPairRead()
	}
	defer r.pairs.Put(p)
	p.sessionPK.Value, p.userPK.Value, p.userSK.Value = e.pk, u.pk, u.sk
	if l.MREC {
		p.endPK.Value = l.EndPK(e.pk)
		p.revocationPK.Value = l.IndexPK(u.pk, u.sk)
	}
	found, err := r.BatchGetInput(ctx, &p.in)
	if err != nil {
		return err
	}
	for _, av := range found {
		pk := attrS(av, l.PartitionKey)
		switch {
		case pk == e.pk && (l.HashOnly || attrS(av, l.SortKey) == item.SessionSort):
			e.item = av
		case l.MREC && pk == p.endPK.Value && attrS(av, item.AttrKind) != item.KindSession:
			e.end = av
		case pk == u.pk && (l.HashOnly || attrS(av, l.SortKey) == u.sk):
			u.user = av
		case l.MREC && pk == p.revocationPK.Value:
			u.revocation = av
		}
	}
	return nil
}

func (r *Reader) newPairRead() *pairRead {
	l := &r.Layout
	p := &pairRead{}
	session := map[string]types.AttributeValue{l.PartitionKey: &p.sessionPK}
	user := map[string]types.AttributeValue{l.PartitionKey: &p.userPK}
	keys := []map[string]types.AttributeValue{session, user}
	if !l.HashOnly {
		session[l.SortKey] = l.SessionKey("")[l.SortKey]
		user[l.SortKey] = &p.userSK
	}
	if l.MREC {
		end := l.EndKey("")
		end[l.PartitionKey] = &p.endPK
		revocation := l.RevocationKey("", "")
		revocation[l.PartitionKey] = &p.revocationPK
		keys = append(keys, end, revocation)
	}
	p.in.RequestItems = map[string]types.KeysAndAttributes{r.Table: {Keys: keys, ConsistentRead: consistent}}
	return p
}

// putNew is a PutItem of av that must find no item under its key.
func putNew(table, pk string, av map[string]types.AttributeValue) *dynamodb.PutItemInput {
	cond := "attribute_not_exists(#pk)"
	return &dynamodb.PutItemInput{TableName: &table, Item: av, ConditionExpression: &cond, ExpressionAttributeNames: map[string]string{"#pk": pk}}
}

// isConditionFailed reports whether err is a write's failed condition.
func isConditionFailed(err error) bool {
	return errors.As(err, new(*types.ConditionalCheckFailedException))
}
