// Package dbsctest plays a browser's side of device binding (DBSC) in
// tests: a device key, ES256 or RS256, that signs registration and refresh
// JWTs as Chromium does, and the parsing of the headers a server sends.
package dbsctest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
)

// Device is a device key.
type Device struct {
	Alg string // "ES256" or "RS256"
	key crypto.Signer
}

// NewES256 returns a device with a fresh P-256 key, as Chromium's software
// keys are.
func NewES256() *Device {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return &Device{Alg: "ES256", key: key}
}

// NewRS256 returns a device with a fresh 2048-bit RSA key.
func NewRS256() *Device {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return &Device{Alg: "RS256", key: key}
}

// New returns a device with key, a P-256 ECDSA or an RSA key, for tests
// that need a key no browser would make (an RSA key of 1024 bits) or a
// chosen one (a P-256 point whose x starts with a zero byte).
func New(key crypto.Signer) *Device {
	switch key.(type) {
	case *ecdsa.PrivateKey:
		return &Device{Alg: "ES256", key: key}
	case *rsa.PrivateKey:
		return &Device{Alg: "RS256", key: key}
	}
	panic(fmt.Sprintf("dbsctest: a %T is not a DBSC key", key))
}

var b64 = base64.RawURLEncoding

// JWK is the device's public key as Chromium puts it in a registration
// JWT's header.
func (d *Device) JWK() map[string]string {
	switch pub := d.key.Public().(type) {
	case *ecdsa.PublicKey:
		point, err := pub.Bytes()
		if err != nil {
			panic(err)
		}
		return map[string]string{"kty": "EC", "crv": "P-256", "x": b64.EncodeToString(point[1:33]), "y": b64.EncodeToString(point[33:])}
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "n": b64.EncodeToString(pub.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(pub.E)).Bytes())}
	}
	panic("unknown key")
}

// PrivateJWK is the device's P-256 key as a JWK with its private member
// "d": what no client may put in a token's header.
func (d *Device) PrivateJWK() map[string]string {
	jwk := d.JWK()
	key := d.key.(*ecdsa.PrivateKey)
	b, err := key.Bytes()
	if err != nil {
		panic(err)
	}
	jwk["d"] = b64.EncodeToString(b)
	return jwk
}

// Thumbprint is the JWK SHA-256 thumbprint (RFC 7638) of the device's
// public key, computed on the client's side from its JWK.
func (d *Device) Thumbprint() string {
	jwk := d.JWK()
	var canonical string
	if jwk["kty"] == "EC" {
		canonical = fmt.Sprintf(`{"crv":%q,"kty":"EC","x":%q,"y":%q}`, jwk["crv"], jwk["x"], jwk["y"])
	} else {
		canonical = fmt.Sprintf(`{"e":%q,"kty":"RSA","n":%q}`, jwk["e"], jwk["n"])
	}
	sum := sha256.Sum256([]byte(canonical))
	return b64.EncodeToString(sum[:])
}

// Registration returns the JWT that registers the device for challenge:
// header {"alg","jwk","typ":"dbsc+jwt"}, payload {"jti": challenge}.
func (d *Device) Registration(challenge string) string {
	return d.Sign(map[string]any{"alg": d.Alg, "typ": "dbsc+jwt", "jwk": d.JWK()}, map[string]any{"jti": challenge})
}

// Refresh returns the JWT that answers a refresh challenge: no key in the
// header.
func (d *Device) Refresh(challenge string) string {
	return d.Sign(map[string]any{"alg": d.Alg, "typ": "dbsc+jwt"}, map[string]any{"jti": challenge})
}

// Sign signs any header and payload with the device key, for tests that
// send what no browser would.
func (d *Device) Sign(header, payload map[string]any) string {
	return d.SignRaw(mustJSON(header), mustJSON(payload))
}

// SignRaw signs header and payload JSON as given.
func (d *Device) SignRaw(header, payload []byte) string {
	signed := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	digest := sha256.Sum256([]byte(signed))
	var sig []byte
	switch key := d.key.(type) {
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
		if err != nil {
			panic(err)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	case *rsa.PrivateKey:
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:]); err != nil {
			panic(err)
		}
	}
	return signed + "." + b64.EncodeToString(sig)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

var (
	registrationRe = regexp.MustCompile(`^\(([A-Z0-9 ]+)\);path="([^"]*)";challenge="([^"]*)"$`)
	challengeRe    = regexp.MustCompile(`^"([^"]+)";id="([^"]+)"$`)
)

// Offer is a Secure-Session-Registration header, parsed.
type Offer struct {
	Algs      string // as listed, "ES256 RS256"
	Path      string
	Challenge string
}

// ParseOffer parses a Secure-Session-Registration header value of the
// form the server sends.
func ParseOffer(v string) (Offer, error) {
	m := registrationRe.FindStringSubmatch(v)
	if m == nil {
		return Offer{}, fmt.Errorf("not a registration offer: %q", v)
	}
	return Offer{Algs: m[1], Path: m[2], Challenge: m[3]}, nil
}

// ParseChallenge parses a Secure-Session-Challenge header value: the
// challenge and the session ID it is for.
func ParseChallenge(v string) (challenge, id string, err error) {
	m := challengeRe.FindStringSubmatch(v)
	if m == nil {
		return "", "", fmt.Errorf("not a challenge: %q", v)
	}
	return m[1], m[2], nil
}
