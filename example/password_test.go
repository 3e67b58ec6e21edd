package main

import (
	"strings"
	"testing"
)

func TestPasswordHash(t *testing.T) {
	slot, err := newHasher(1, 0, owaspCost).acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer slot.release()
	long := strings.Repeat("p", maxPassword)
	h1, h2 := slot.hash(long), slot.hash(long)
	if !strings.HasPrefix(string(h1), "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash %q: want argon2id at OWASP's minimum, m=19456,t=2,p=1", h1)
	}
	if h1 == h2 {
		t.Errorf("two hashes of one password are equal: the salt is not random")
	}
	for _, tc := range []struct {
		name     string
		hash     passwordHash
		password string
		want     bool
	}{
		{"same password", h1, long, true},
		{"other salt, same password", h2, long, true},
		// bcrypt would accept this one: it ignores bytes past the 72nd.
		{"differs after byte 72", h1, long[:1000] + "q", false},
		{"empty", h1, "", false},
	} {
		ok, err := slot.verify(tc.hash, tc.password)
		if err != nil || ok != tc.want {
			t.Errorf("%s: verify = %v, %v; want %v", tc.name, ok, err, tc.want)
		}
	}
	for _, bad := range []passwordHash{"", "$2a$10$bcrypt", "$argon2id$v=19$m=19456,t=0,p=1$c2FsdA$a2V5", "$argon2id$v=18$m=1,t=1,p=1$c2FsdA$a2V5"} {
		if _, err := slot.verify(bad, "x"); err == nil {
			t.Errorf("verify(%q) did not fail", bad)
		}
	}
}
