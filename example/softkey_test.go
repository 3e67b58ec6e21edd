package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/go-webauthn/webauthn/protocol/webauthncbor"
)

// softKey is a software authenticator: one ES256 passkey, discoverable,
// that verifies its user, built by hand (authenticator data, client data,
// attestation "none") so that a test can make each field exactly what it
// needs, a wrong one too.
type softKey struct {
	key    *ecdsa.PrivateKey
	credID []byte
	handle []byte // the user handle, from the registration's webauthnOptions
	// rpID and origin are what it signs for: the app's, unless a test
	// makes them another site's.
	rpID, origin string
	// counter is the sign counter its next assertion carries; with
	// counting, each assertion adds one first.
	counter  uint32
	counting bool
}

func newSoftKey(t *testing.T, rpID, origin string) *softKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 16)
	rand.Read(id)
	return &softKey{key: key, credID: id, rpID: rpID, origin: origin}
}

var b64url = base64.RawURLEncoding

// webauthnOptions is the part of a begin step's answer the authenticator reads.
type webauthnOptions struct {
	PublicKey struct {
		Challenge string `json:"challenge"`
		User      struct {
			ID string `json:"id"`
		} `json:"user"`
		AllowCredentials []struct {
			ID string `json:"id"`
		} `json:"allowCredentials"`
		AuthenticatorSelection struct {
			ResidentKey      string `json:"residentKey"`
			UserVerification string `json:"userVerification"`
		} `json:"authenticatorSelection"`
		UserVerification string `json:"userVerification"`
	} `json:"publicKey"`
}

func parseOptions(t *testing.T, body string) webauthnOptions {
	t.Helper()
	var o webauthnOptions
	if err := json.Unmarshal([]byte(body), &o); err != nil || o.PublicKey.Challenge == "" {
		t.Fatalf("a begin step's answer is no WebAuthn webauthnOptions (%v): %s", err, body)
	}
	return o
}

func (k *softKey) clientData(t *testing.T, typ, challenge string) []byte {
	t.Helper()
	data, err := json.Marshal(map[string]any{"type": typ, "challenge": challenge, "origin": k.origin, "crossOrigin": false})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// authData is the authenticator data: the RP ID's hash, flags UP and UV
// (and AT with attested), and the counter.
func (k *softKey) authData(attested []byte) []byte {
	rpHash := sha256.Sum256([]byte(k.rpID))
	flags := byte(0x01 | 0x04) // user present, user verified
	if attested != nil {
		flags |= 0x40
	}
	out := append(rpHash[:], flags)
	out = binary.BigEndian.AppendUint32(out, k.counter)
	return append(out, attested...)
}

// create answers a registration's webauthnOptions, as navigator.credentials.create
// and toJSON would: the credential, attestation "none".
func (k *softKey) create(t *testing.T, o webauthnOptions) json.RawMessage {
	t.Helper()
	handle, err := b64url.DecodeString(o.PublicKey.User.ID)
	if err != nil || len(handle) == 0 {
		t.Fatalf("registration webauthnOptions with user.id %q", o.PublicKey.User.ID)
	}
	k.handle = handle
	cose, err := webauthncbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: k.key.X.FillBytes(make([]byte, 32)), -3: k.key.Y.FillBytes(make([]byte, 32))})
	if err != nil {
		t.Fatal(err)
	}
	attested := make([]byte, 16) // AAGUID: none
	attested = binary.BigEndian.AppendUint16(attested, uint16(len(k.credID)))
	attested = append(append(attested, k.credID...), cose...)
	att, err := webauthncbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": k.authData(attested)})
	if err != nil {
		t.Fatal(err)
	}
	return k.marshal(t, map[string]any{
		"clientDataJSON":    b64url.EncodeToString(k.clientData(t, "webauthn.create", o.PublicKey.Challenge)),
		"attestationObject": b64url.EncodeToString(att),
		"transports":        []string{"internal"},
	})
}

// get answers a sign-in's webauthnOptions, as navigator.credentials.get and
// toJSON would: an assertion, signed, with the user handle.
func (k *softKey) get(t *testing.T, o webauthnOptions) json.RawMessage {
	t.Helper()
	if k.counting {
		k.counter++
	}
	authData := k.authData(nil)
	clientData := k.clientData(t, "webauthn.get", o.PublicKey.Challenge)
	clientHash := sha256.Sum256(clientData)
	digest := sha256.Sum256(append(append([]byte{}, authData...), clientHash[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, k.key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	return k.marshal(t, map[string]any{
		"clientDataJSON":    b64url.EncodeToString(clientData),
		"authenticatorData": b64url.EncodeToString(authData),
		"signature":         b64url.EncodeToString(sig),
		"userHandle":        b64url.EncodeToString(k.handle),
	})
}

func (k *softKey) marshal(t *testing.T, response map[string]any) json.RawMessage {
	t.Helper()
	out, err := json.Marshal(map[string]any{
		"id": b64url.EncodeToString(k.credID), "rawId": b64url.EncodeToString(k.credID), "type": "public-key",
		"authenticatorAttachment": "platform", "response": response, "clientExtensionResults": map[string]any{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
