package main

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Passwords are hashed with argon2id, not bcrypt: bcrypt reads only the
// first 72 bytes of a password, and this app accepts up to 1 KiB, so two
// passwords sharing a 72-byte prefix would hash alike. Pre-hashing for
// bcrypt would fix that at the cost of one more construction to get right;
// argon2id takes any length as it is and is OWASP's first choice.
//
// The cost is OWASP's minimum for argon2id (19 MiB, 2 passes, 1 lane). Each
// hash records its own parameters in the PHC string format, so they can be
// raised later without breaking existing hashes.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

var b64 = base64.RawStdEncoding

// hashing bounds how many argon2id computations run at once. Each takes
// 19 MiB and a core, and an anonymous visitor can start one per login
// attempt (unknown users are hashed too), so without a bound a burst of
// logins could exhaust memory. Extra requests wait their turn.
var hashing = make(chan struct{}, runtime.NumCPU())

func argonKey(password string, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte {
	hashing <- struct{}{}
	defer func() { <-hashing }()
	return argon2.IDKey([]byte(password), salt, time, memory, threads, keyLen)
}

// hashPassword returns password's argon2id hash with a fresh random salt, as
// "$argon2id$v=19$m=19456,t=2,p=1$<salt>$<key>".
func hashPassword(password string) string {
	salt := make([]byte, argonSaltLen)
	rand.Read(salt)
	key := argonKey(password, salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// verifyPassword reports whether password matches hash, doing the full hash
// work either way. An error means that hash is not a hash this app wrote.
func verifyPassword(hash, password string) (bool, error) {
	parts := strings.Split(hash, "$")
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
	got := argonKey(password, salt, time, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}
