package item

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Stamp is what a login reads of everything that can end the session it
// makes, and what the session copies: the session stands while each part
// is still what its login read. Every part is a number compared for
// equality, never a time: no clock takes part.
type Stamp struct {
	// Revocation is the version that RevokeAll changes: the user item's
	// sessions version ([Layout.VersionAttribute]), or under MREC the
	// user's revocation item's (state.go), which no write of the app's
	// can settle over.
	Revocation int64
	// User is the user item's sessions version, which a user item made
	// anew under the same key has anew: its incarnation. Outside MREC it
	// is Revocation too; under MREC RevokeAll leaves it alone.
	User int64
	// Credential is the user item's credential version
	// ([Layout.CredentialAttribute]), which the app changes with the
	// credential, in the same write; 0 for an item without one.
	Credential int64
	// Global is the table's global revocation generation (global.go),
	// which RevokeEveryone changes.
	Global int64
}

// NewVersion returns a user item's first sessions version: random, so that
// no session of a user deleted before, under the same key, copied it, and
// below 2^62, so that the changes that add to it never overflow.
func NewVersion() int64 { return 1<<32 + rand.Int64N(1<<62-1<<32) }

// versionStep returns what a change of a version adds to it: random and
// positive, so that two changes made within a global table's replication
// lag, in two Regions, from the same version, write two versions (the same
// one with a chance of 2^-40), and a version only rises in a Region.
func versionStep() int64 { return 1 + rand.Int64N(1<<40) }

// UserStamp is the stamp that a login reads now from user, a user item,
// and under MREC revocation, the user's revocation item (nil for none);
// Global is the caller's. An attribute of the wrong type is an error.
func (l *Layout) UserStamp(user, revocation map[string]types.AttributeValue) (Stamp, error) {
	var s Stamp
	var err error
	if s.User, _, err = GetNum(user, l.VersionAttribute); err != nil {
		return Stamp{}, fmt.Errorf("the user item's sessions version: %w", err)
	}
	if s.Credential, _, err = GetNum(user, l.CredentialAttribute); err != nil {
		return Stamp{}, fmt.Errorf("the user item's credential version: %w", err)
	}
	s.Revocation = s.User
	if l.MREC {
		if s.Revocation, err = DecodeRevocation(revocation); err != nil {
			return Stamp{}, fmt.Errorf("the user's revocation item: %w", err)
		}
	}
	return s, nil
}

// AttrRevokedAt is when RevokeAll last ended a user's sessions, in epoch
// milliseconds: on the user item, or under MREC on the user's revocation
// item. A session of an old store (Manager.Adopt) from before it is not
// adopted; nothing else reads it.
const AttrRevokedAt = "revokedAt"

// ChangeVersion changes an existing user item's sessions version, adding
// a random step to it (see versionStep), and records the revocation's time
// at. It fails on a user item without a version, which StartVersion gives
// one.
func (l *Layout) ChangeVersion(at time.Time) Writes {
	return Writes{
		Update:    "SET #ver = #ver + :step, #rat = :rat",
		Condition: "attribute_exists(#pk) AND attribute_exists(#ver)",
		Names:     map[string]string{"#pk": l.PartitionKey, "#ver": l.VersionAttribute, "#rat": AttrRevokedAt},
		Values:    map[string]types.AttributeValue{":step": Num(versionStep()), ":rat": Num(at.UnixMilli())},
	}
}

// RevokedAt is when RevokeAll last ended the sessions of the user whose
// user item and revocation item (MREC; nil for none) a login reads: zero
// for never, or an attribute of another type.
func (l *Layout) RevokedAt(user, revocation map[string]types.AttributeValue) time.Time {
	from := user
	if l.MREC {
		from = revocation
	}
	if ms, ok, err := GetNum(from, AttrRevokedAt); ok && err == nil {
		return time.UnixMilli(ms)
	}
	return time.Time{}
}

// StartVersion gives an existing user item without a sessions version one
// (NewVersion): what RevokeAll does to a user item the app wrote without,
// which no login accepts, to end the sessions of release v0.1.0 that
// copied none.
func (l *Layout) StartVersion(at time.Time) Writes {
	return Writes{
		Update:    "SET #ver = :ver, #rat = :rat",
		Condition: "attribute_exists(#pk) AND attribute_not_exists(#ver)",
		Names:     map[string]string{"#pk": l.PartitionKey, "#ver": l.VersionAttribute, "#rat": AttrRevokedAt},
		Values:    map[string]types.AttributeValue{":ver": Num(NewVersion()), ":rat": Num(at.UnixMilli())},
	}
}

// ChangeRevocation changes a user's revocation item's version (MREC),
// creating the item if need be, by a random step (see versionStep), and
// records the revocation's time at unless it is zero (a user item made
// anew is no revocation of an old store's sessions).
func (l *Layout) ChangeRevocation(at time.Time) Writes {
	w := l.addGen(KindRevocation)
	if !at.IsZero() {
		w.Update = strings.Replace(w.Update, "SET ", "SET #rat = :rat, ", 1)
		w.Names["#rat"], w.Values[":rat"] = AttrRevokedAt, Num(at.UnixMilli())
	}
	return w
}

// addGen adds a random step to the version of the library's item of kind
// (the global item, a revocation item), which it creates if need be, and
// never writes over an item of another kind.
func (l *Layout) addGen(kind string) Writes {
	return Writes{
		Update:    "SET #v = :v, #kind = :kind ADD #gen :step",
		Condition: "attribute_not_exists(#pk) OR #kind = :kind",
		Names:     map[string]string{"#pk": l.PartitionKey, "#v": AttrVersion, "#kind": AttrKind, "#gen": AttrGen},
		Values:    map[string]types.AttributeValue{":v": Num(StateFormat), ":kind": Str(kind), ":step": Num(versionStep())},
	}
}
