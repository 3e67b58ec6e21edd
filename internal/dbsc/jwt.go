// Package dbsc reads the JSON Web Tokens that a client signs with a key of
// its device, and the key itself, a JSON Web Key: a browser's for Device
// Bound Session Credentials (W3C webappsec-dbsc), and a bearer client's
// DPoP proofs (RFC 9449). It uses the standard library only and accepts
// the two algorithms DBSC names, ES256 and RS256, nothing else: no "none",
// no HMAC, no key chosen by the token.
package dbsc

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// MaxJWT bounds a token's length. An RS256 token with a 4096-bit key in its
// header is under 2 KB; anything much longer is not a browser's.
const MaxJWT = 8 << 10

// The "typ" of the tokens Parse reads: DBSC's, and DPoP proofs.
const (
	Type     = "dbsc+jwt"
	TypeDPoP = "dpop+jwt"
)

// Algorithms, in the order the server offers them.
const (
	ES256 = "ES256"
	RS256 = "RS256"
)

// JWT is a parsed token whose signature is not yet verified.
type JWT struct {
	Alg string
	// Key is the public key of the "jwk" header, nil without one. A
	// registration carries it; a refresh is verified with the key stored
	// at registration.
	Key crypto.PublicKey
	// JTI is the challenge a DBSC token answers, a DPoP proof's unique ID.
	JTI string
	// A DPoP proof's claims (RFC 9449 4.2): the request's method and URL,
	// when it was made (epoch seconds), the access token's hash, and the
	// server's nonce; zero in a DBSC token.
	HTM, HTU string
	IAT      int64
	ATH      string
	Nonce    string

	signed    string // header.payload, what the signature covers
	signature []byte
}

// ErrMalformed is wrapped by every error of Parse.
var ErrMalformed = errors.New("dbsc: malformed token")

var b64 = base64.RawURLEncoding.Strict()

// Parse reads a compact JWS of "typ" typ ([Type] or [TypeDPoP]). It checks
// the form, not the signature: see [JWT.Verify]. A DPoP proof must carry
// its key, and htm, htu and iat.
func Parse(token, typ string) (*JWT, error) {
	if len(token) > MaxJWT {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxJWT)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: not three dot-separated parts", ErrMalformed)
	}
	var header struct {
		Alg string          `json:"alg"`
		Typ string          `json:"typ"`
		JWK json.RawMessage `json:"jwk"`
		// Crit lists extensions the verifier must understand (RFC 7515
		// 4.1.11); this one understands none.
		Crit json.RawMessage `json:"crit"`
	}
	if err := decodeJSON(parts[0], &header); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if header.Typ != typ {
		return nil, fmt.Errorf("%w: typ %q is not %q", ErrMalformed, header.Typ, typ)
	}
	if header.Alg != ES256 && header.Alg != RS256 {
		return nil, fmt.Errorf("%w: alg %q is neither %s nor %s", ErrMalformed, header.Alg, ES256, RS256)
	}
	if header.Crit != nil {
		return nil, fmt.Errorf("%w: crit header", ErrMalformed)
	}
	t := &JWT{Alg: header.Alg, signed: parts[0] + "." + parts[1]}
	if header.JWK != nil {
		key, err := ParseJWK(header.JWK)
		if err != nil {
			return nil, fmt.Errorf("%w: jwk: %v", ErrMalformed, err)
		}
		if AlgOf(key) != header.Alg {
			return nil, fmt.Errorf("%w: alg %s does not fit the jwk's key type", ErrMalformed, header.Alg)
		}
		t.Key = key
	}
	var payload struct {
		JTI   string `json:"jti"`
		HTM   string `json:"htm"`
		HTU   string `json:"htu"`
		IAT   int64  `json:"iat"`
		ATH   string `json:"ath"`
		Nonce string `json:"nonce"`
	}
	if err := decodeJSON(parts[1], &payload); err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	if payload.JTI == "" {
		return nil, fmt.Errorf("%w: no jti", ErrMalformed)
	}
	if typ == TypeDPoP && (t.Key == nil || payload.HTM == "" || payload.HTU == "" || payload.IAT <= 0) {
		return nil, fmt.Errorf("%w: a DPoP proof needs jwk, htm, htu and iat", ErrMalformed)
	}
	t.JTI, t.HTM, t.HTU, t.IAT, t.ATH, t.Nonce = payload.JTI, payload.HTM, payload.HTU, payload.IAT, payload.ATH, payload.Nonce
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return nil, fmt.Errorf("%w: signature: %v", ErrMalformed, err)
	}
	t.signature = sig
	return t, nil
}

func decodeJSON(part string, v any) error {
	raw, err := b64.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// ErrSignature is returned by Verify for a signature that the key did not
// make.
var ErrSignature = errors.New("dbsc: bad signature")

// Verify checks the token's signature with key, which must be of the
// token's algorithm.
func (t *JWT) Verify(key crypto.PublicKey) error {
	if AlgOf(key) != t.Alg {
		return fmt.Errorf("%w: alg %s does not fit the key", ErrSignature, t.Alg)
	}
	digest := sha256.Sum256([]byte(t.signed))
	switch key := key.(type) {
	case *ecdsa.PublicKey:
		// JWS carries r and s as two 32-byte big-endian integers
		// (RFC 7518 3.4), not ASN.1.
		if len(t.signature) != 64 {
			return fmt.Errorf("%w: %d bytes, not 64", ErrSignature, len(t.signature))
		}
		r := new(big.Int).SetBytes(t.signature[:32])
		s := new(big.Int).SetBytes(t.signature[32:])
		if !ecdsa.Verify(key, digest[:], r, s) {
			return ErrSignature
		}
	case *rsa.PublicKey:
		if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], t.signature); err != nil {
			return ErrSignature
		}
	}
	return nil
}

// AlgOf names the algorithm of a key that ParseJWK returned, or "".
func AlgOf(key crypto.PublicKey) string {
	switch key.(type) {
	case *ecdsa.PublicKey:
		return ES256
	case *rsa.PublicKey:
		return RS256
	}
	return ""
}

// RSA keys outside these bounds are refused: shorter moduli are weak;
// longer ones, and exponents other than 65537 (the one browsers use), only
// make verifying cost the server more, for anyone who posts a token.
const (
	minRSABits  = 2048
	maxRSABits  = 4096
	rsaExponent = 65537
)

// ParseJWK reads a public JSON Web Key: a P-256 EC key or an RSA key. The
// curve point is checked to be on the curve.
func ParseJWK(raw []byte) (crypto.PublicKey, error) {
	var jwk struct {
		Kty string `json:"kty"`
		Crv string `json:"crv"`
		X   string `json:"x"`
		Y   string `json:"y"`
		N   string `json:"n"`
		E   string `json:"e"`
		D   string `json:"d"`
	}
	if err := json.Unmarshal(raw, &jwk); err != nil {
		return nil, err
	}
	if jwk.D != "" {
		return nil, errors.New("a private key")
	}
	switch jwk.Kty {
	case "EC":
		if jwk.Crv != "P-256" {
			return nil, fmt.Errorf("curve %q is not P-256", jwk.Crv)
		}
		x, errX := b64.DecodeString(jwk.X)
		y, errY := b64.DecodeString(jwk.Y)
		if errX != nil || errY != nil || len(x) > 32 || len(y) > 32 {
			return nil, errors.New("x and y must be at most 32 bytes each")
		}
		// RFC 7518 asks for 32 bytes each; some Chromium releases dropped
		// leading zero bytes, so shorter ones are padded back.
		point := make([]byte, 65)
		point[0] = 4
		copy(point[33-len(x):33], x)
		copy(point[65-len(y):], y)
		key, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
		if err != nil {
			return nil, err
		}
		return key, nil
	case "RSA":
		n, errN := b64.DecodeString(jwk.N)
		e, errE := b64.DecodeString(jwk.E)
		if errN != nil || errE != nil || len(n) == 0 || n[0] == 0 || len(e) == 0 || len(e) > 4 || e[0] == 0 {
			return nil, errors.New("n and e must be minimal big-endian integers")
		}
		key := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if bits := key.N.BitLen(); bits < minRSABits || bits > maxRSABits {
			return nil, fmt.Errorf("a %d-bit modulus; want %d to %d bits", bits, minRSABits, maxRSABits)
		}
		if key.E != rsaExponent {
			return nil, fmt.Errorf("exponent %d is not %d", key.E, rsaExponent)
		}
		return key, nil
	}
	return nil, fmt.Errorf("kty %q is neither EC nor RSA", jwk.Kty)
}

// MarshalJWK writes a key that ParseJWK returned as a JWK with its public
// members only, the form in which the table keeps it.
func MarshalJWK(key crypto.PublicKey) (string, error) {
	var v any
	switch key := key.(type) {
	case *ecdsa.PublicKey:
		point, err := key.Bytes()
		if err != nil {
			return "", err
		}
		v = struct {
			Kty string `json:"kty"`
			Crv string `json:"crv"`
			X   string `json:"x"`
			Y   string `json:"y"`
		}{"EC", "P-256", b64.EncodeToString(point[1:33]), b64.EncodeToString(point[33:])}
	case *rsa.PublicKey:
		v = struct {
			Kty string `json:"kty"`
			N   string `json:"n"`
			E   string `json:"e"`
		}{"RSA", b64.EncodeToString(key.N.Bytes()), b64.EncodeToString(big.NewInt(int64(key.E)).Bytes())}
	default:
		return "", fmt.Errorf("dbsc: a %T is not a DBSC key", key)
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// Thumbprint is key's JWK SHA-256 thumbprint (RFC 7638), base64url: the
// hash of its required members, in lexical order, without spaces. Built
// from the key, not from the JWK as sent, so that two encodings of one key
// (Chromium's short coordinates) have one thumbprint.
func Thumbprint(key crypto.PublicKey) (string, error) {
	var canonical string
	switch key := key.(type) {
	case *ecdsa.PublicKey:
		point, err := key.Bytes()
		if err != nil {
			return "", err
		}
		canonical = `{"crv":"P-256","kty":"EC","x":"` + b64.EncodeToString(point[1:33]) + `","y":"` + b64.EncodeToString(point[33:]) + `"}`
	case *rsa.PublicKey:
		canonical = `{"e":"` + b64.EncodeToString(big.NewInt(int64(key.E)).Bytes()) + `","kty":"RSA","n":"` + b64.EncodeToString(key.N.Bytes()) + `"}`
	default:
		return "", fmt.Errorf("dbsc: a %T has no thumbprint here", key)
	}
	sum := sha256.Sum256([]byte(canonical))
	return b64.EncodeToString(sum[:]), nil
}

// SameKey reports whether a and b are the same public key.
func SameKey(a, b crypto.PublicKey) bool {
	switch a := a.(type) {
	case *ecdsa.PublicKey:
		return a.Equal(b)
	case *rsa.PublicKey:
		return a.Equal(b)
	}
	return false
}
