package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/argon2"
)

// Passwords are hashed with argon2id, not bcrypt: bcrypt reads only the
// first 72 bytes of a password, and this app accepts up to 1 KiB, so two
// passwords sharing a 72-byte prefix would hash alike. Pre-hashing for
// bcrypt would fix that at the cost of one more construction to get right;
// argon2id takes any length as it is and is OWASP's first choice.
//
// The cost is OWASP's minimum for argon2id (19 MiB, 2 passes, 1 lane)
// unless appConfig.HashCost says otherwise. Each hash records its own
// parameters in the PHC string format, so they can be raised later without
// breaking existing hashes.
const (
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// argonCost is argon2id's work per hash: Time passes over Memory KiB.
type argonCost struct{ Time, Memory uint32 }

// owaspCost is the default: OWASP's minimum for argon2id.
var owaspCost = argonCost{Time: 2, Memory: 19 * 1024}

var b64 = base64.RawStdEncoding

// hasher runs the app's argon2id work. Each hash takes 19 MiB and a core
// for tens of milliseconds, and an anonymous visitor can ask for one with
// every login attempt (unknown users are hashed too), so it bounds both the
// hashes that run at once and the requests that wait for them:
//
//   - A request waits for a hashing slot only while its context lives. A
//     client that gives up leaves the queue without hashing, so a burst of
//     abandoned logins does not keep the hasher busy, after the fact, for
//     the real ones behind it.
//   - A request that finds the queue full is refused at once (503) rather
//     than piling up goroutines and forms in memory.
type hasher struct {
	running  chan struct{} // one token per hash slot held
	admitted chan struct{} // one token per request holding or awaiting a slot
	hashes   atomic.Int64  // argon2id computations done, for the tests
	cost     argonCost     // of the hashes it writes
}

// errHasherBusy is acquire's answer when the queue is full.
var errHasherBusy = errors.New("password hasher: too many requests waiting")

// newHasher returns a hasher that runs slots hashes at once, with at most
// queue more requests waiting, and writes hashes of cost.
func newHasher(slots, queue int, cost argonCost) *hasher {
	return &hasher{running: make(chan struct{}, slots), admitted: make(chan struct{}, slots+queue), cost: cost}
}

// hashSlot is the right to run argon2id, from acquire to release.
type hashSlot struct {
	h    *hasher
	once sync.Once
}

// acquire waits for a hashing slot while ctx lives. It returns
// errHasherBusy if the queue is full, and ctx's error if ctx ends first.
func (h *hasher) acquire(ctx context.Context) (*hashSlot, error) {
	select {
	case h.admitted <- struct{}{}:
	default:
		return nil, errHasherBusy
	}
	select {
	case h.running <- struct{}{}:
	case <-ctx.Done():
		<-h.admitted
		return nil, ctx.Err()
	}
	s := &hashSlot{h: h}
	if err := ctx.Err(); err != nil { // a slot came free just as ctx ended
		s.release()
		return nil, err
	}
	return s, nil
}

// queued reports how many requests wait for a slot.
func (h *hasher) queued() int { return len(h.admitted) - len(h.running) }

// release gives the slot back. It may be called more than once.
func (s *hashSlot) release() {
	s.once.Do(func() {
		<-s.h.running
		<-s.h.admitted
	})
}

func (s *hashSlot) argonKey(password string, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte {
	s.h.hashes.Add(1)
	return argon2.IDKey([]byte(password), salt, time, memory, threads, keyLen)
}

// hash returns password's argon2id hash with a fresh random salt, as
// "$argon2id$v=19$m=19456,t=2,p=1$<salt>$<key>" at the default cost.
func (s *hashSlot) hash(password string) passwordHash {
	salt := make([]byte, argonSaltLen)
	rand.Read(salt)
	c := s.h.cost
	key := s.argonKey(password, salt, c.Time, c.Memory, argonThreads, argonKeyLen)
	return passwordHash(fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, c.Memory, c.Time, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)))
}

// verify reports whether password matches hash, doing the full hash work
// either way. An error means that hash is not a hash this app wrote.
func (s *hashSlot) verify(hash passwordHash, password string) (bool, error) {
	parts := strings.Split(string(hash), "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errors.New("password hash is not argon2id in PHC format")
	}
	var version int
	var memory, time uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, fmt.Errorf("password hash has unsupported version %q", parts[2])
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &time, &threads); err != nil {
		return false, fmt.Errorf("password hash parameters %q: %v", parts[3], err)
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false, fmt.Errorf("password hash salt: %v", err)
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil {
		return false, fmt.Errorf("password hash key: %v", err)
	}
	if time == 0 || threads == 0 || len(want) == 0 {
		return false, fmt.Errorf("password hash parameters %q are out of range", parts[3])
	}
	got := s.argonKey(password, salt, time, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}
