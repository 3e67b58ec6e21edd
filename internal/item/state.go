package item

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The state item holds what of a user's sessions only the library writes:
// the sessions that a per-user session limit counts, and the revocation
// state for tables replicated across Regions with multi-Region eventual
// consistency (MREC). There, concurrent writes of one item in two
// Regions are settled whole-item, last writer wins: an app's own write of
// the user item in one Region can undo a RevokeAll's raise of the cutoff
// there in another, and a refresh's write of a session item can bring back
// one that a Logout deleted. The state item sits in the user's index
// partition, which only the library writes, and carries the cutoff beside
// the user item's (the higher of the two counts) and the IDs of the
// sessions ended lately, until any copy of them that such a write could
// bring back has expired.
//
//	pk      S  the user's index partition, as the index items'
//	sk      S  STATE
//	v       N  1
//	kind    S  "session-state"
//	gen            N  the user's revocation version, as the user item's cutoff
//	endedSessions  M  session ID -> N, epoch seconds until which it stays ended
//	liveSessions   M  session ID -> N, creation in epoch ms: the sessions a
//	                  session limit counts, which alone are valid
//	endedRev       N  counts the writes of endedSessions and liveSessions
const (
	KindState         = "session-state"
	stateSort         = "STATE"
	AttrStateCutoff   = AttrGen
	AttrStateEnded    = "endedSessions"
	AttrStateSessions = "liveSessions"
)

// State is a user's state item, decoded; the zero State is a user without
// one.
type State struct {
	Cutoff int64
	Ended  map[string]int64 // session ID -> epoch seconds
	// Sessions are the sessions that a session limit counts: session ID ->
	// creation, epoch milliseconds. Only they are valid of the sessions
	// created under the limit.
	Sessions map[string]int64
	// Rev counts the writes of Ended and Sessions, for the next one's
	// condition.
	Rev int64
}

// StateKey addresses the state item of a user.
func (l *Layout) StateKey(userPK, userSK string) map[string]types.AttributeValue {
	return l.Key(l.IndexPK(userPK, userSK), stateSort)
}

// Ends reports whether s lists session id as ended at now.
func (s State) Ends(id string, now time.Time) bool {
	until, ok := s.Ended[id]
	return ok && now.Unix() < until
}

// DecodeState reads a state item; the zero State for none. An item that is
// not a state item of this format is an error wrapping [ErrMalformed], so
// that its reader fails closed rather than forget an end.
func DecodeState(av map[string]types.AttributeValue) (State, error) {
	if av == nil {
		return State{}, nil
	}
	if k, _ := av[AttrKind].(*types.AttributeValueMemberS); k == nil || k.Value != KindState {
		return State{}, fmt.Errorf("%w: not a %s item", ErrMalformed, KindState)
	}
	d := decoder{av: av}
	var s State
	if v := d.num(AttrVersion); d.err == nil && v != Version {
		d.fail("state format version %d is not %d", v, Version)
	}
	if _, present := av[AttrStateCutoff]; present {
		s.Cutoff = d.num(AttrStateCutoff)
	}
	if _, present := av[attrStateRev]; present {
		s.Rev = d.num(attrStateRev)
	}
	s.Ended = d.numMap(AttrStateEnded)
	s.Sessions = d.numMap(AttrStateSessions)
	if d.err != nil {
		return State{}, d.err
	}
	return s, nil
}

// numMap reads an optional Map of Numbers; nil if absent.
func (d *decoder) numMap(name string) map[string]int64 {
	m, present := d.av[name]
	if !present {
		return nil
	}
	mv, ok := m.(*types.AttributeValueMemberM)
	if !ok {
		d.fail("%q is not a Map", name)
		return nil
	}
	e := decoder{av: mv.Value}
	out := make(map[string]int64, len(mv.Value))
	for k := range mv.Value {
		out[k] = e.num(k)
	}
	if d.err == nil {
		d.err = e.err
	}
	return out
}

// Holds reports whether s counts session id among those a session limit
// lets live.
func (s State) Holds(id string) bool {
	_, ok := s.Sessions[id]
	return ok
}

// attrStateRev holds State.Rev.
const attrStateRev = "endedRev"

// RaiseStateCutoff moves a state item's cutoff to ms unless it is there or
// later already, creating the item if need be.
func (l *Layout) RaiseStateCutoff(ms int64) Writes {
	return Writes{
		Update:    "SET #v = :v, #kind = :kind, #cutoff = :c",
		Condition: "attribute_not_exists(#cutoff) OR #cutoff < :c",
		Names:     map[string]string{"#v": AttrVersion, "#kind": AttrKind, "#cutoff": AttrStateCutoff},
		Values:    map[string]types.AttributeValue{":v": Num(Version), ":kind": Str(KindState), ":c": Num(ms)},
	}
}

// BumpStateCutoff moves a state item's cutoff one on: for a cutoff that
// RaiseStateCutoff found at or after its value.
func (l *Layout) BumpStateCutoff() Writes {
	return Writes{
		Update:    "SET #cutoff = #cutoff + :one",
		Condition: "attribute_exists(#cutoff)",
		Names:     map[string]string{"#cutoff": AttrStateCutoff},
		Values:    map[string]types.AttributeValue{":one": Num(1)},
	}
}

// End records in state s, as read, that session id stays ended until
// until (epoch seconds), and drops the ends that are over at now. It
// writes the whole map on the condition that no other end was written
// since s was read, so that two ends in one Region never lose each other:
// the loser reads again and retries.
func (l *Layout) End(s State, id string, until int64, now time.Time) Writes {
	ended := map[string]types.AttributeValue{id: Num(until)}
	for other, u := range s.Ended {
		if other != id && now.Unix() < u {
			ended[other] = Num(u)
		}
	}
	return s.write(AttrStateEnded, ended)
}

// Count records in state s, as read, that the sessions a session limit
// counts are now sessions (ID -> creation, epoch ms), on the same condition
// as End's: no other write of the state item's maps since s was read. The
// session that takes a slot copies s.Rev+1, the revision this write makes.
func (l *Layout) Count(s State, sessions map[string]int64) Writes {
	m := make(map[string]types.AttributeValue, len(sessions))
	for id, created := range sessions {
		m[id] = Num(created)
	}
	return s.write(AttrStateSessions, m)
}

// write sets the state item's map attr to m, and the revision one on,
// unless another write moved the revision since s was read.
func (s State) write(attr string, m map[string]types.AttributeValue) Writes {
	w := Writes{
		Update: "SET #v = :v, #kind = :kind, #map = :map, #rev = :next",
		Names:  map[string]string{"#v": AttrVersion, "#kind": AttrKind, "#map": attr, "#rev": attrStateRev},
		Values: map[string]types.AttributeValue{
			":v": Num(Version), ":kind": Str(KindState), ":map": &types.AttributeValueMemberM{Value: m}, ":next": Num(s.Rev + 1),
		},
	}
	if s.Rev == 0 {
		w.Condition = "attribute_not_exists(#rev)"
	} else {
		w.Condition = "#rev = :rev"
		w.Values[":rev"] = Num(s.Rev)
	}
	return w
}
