package dbsc_test

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/ddbsession/ddbsession/internal/dbsc"
	"github.com/ddbsession/ddbsession/internal/dbsc/dbsctest"
)

var (
	es256 = dbsctest.NewES256()
	rs256 = dbsctest.NewRS256()
)

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestParseAndVerify(t *testing.T) {
	t.Parallel()
	for _, d := range []*dbsctest.Device{es256, rs256} {
		t.Run(d.Alg, func(t *testing.T) {
			reg, err := dbsc.Parse(d.Registration("c1"), dbsc.Type)
			if err != nil {
				t.Fatal(err)
			}
			if reg.Alg != d.Alg || reg.JTI != "c1" || reg.Key == nil || dbsc.AlgOf(reg.Key) != d.Alg {
				t.Fatalf("registration parsed as %+v", reg)
			}
			if err := reg.Verify(reg.Key); err != nil {
				t.Fatalf("Verify with its own jwk: %v", err)
			}
			// The stored form parses back to the same key.
			stored, err := dbsc.MarshalJWK(reg.Key)
			if err != nil {
				t.Fatal(err)
			}
			key, err := dbsc.ParseJWK([]byte(stored))
			if err != nil || !dbsc.SameKey(key, reg.Key) {
				t.Fatalf("MarshalJWK %s parsed back: %v, same %v", stored, err, dbsc.SameKey(key, reg.Key))
			}
			ref, err := dbsc.Parse(d.Refresh("c2"), dbsc.Type)
			if err != nil || ref.Key != nil || ref.JTI != "c2" {
				t.Fatalf("refresh parsed as %+v, %v", ref, err)
			}
			if err := ref.Verify(key); err != nil {
				t.Fatalf("refresh Verify with the stored key: %v", err)
			}
		})
	}
}

func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	other := dbsctest.NewES256()
	otherKey, _ := mustParse(t, other.Registration("x")).Key.(*ecdsa.PublicKey)
	rsKey, _ := mustParse(t, rs256.Registration("x")).Key.(*rsa.PublicKey)
	esKey := mustParse(t, es256.Registration("x")).Key
	for _, c := range []struct {
		name string
		jwt  string
		key  any
	}{
		{"another EC key", es256.Refresh("c"), otherKey},
		{"an RSA key for ES256", es256.Refresh("c"), rsKey},
		{"an EC key for RS256", rs256.Refresh("c"), esKey},
		{"ES256 signature in ASN.1", asn1ish(t, es256.Refresh("c")), esKey},
		{"ES256 signature of 63 bytes", truncateSig(t, es256.Refresh("c"), 63), esKey},
		{"RS256 signature truncated", truncateSig(t, rs256.Refresh("c"), 255), rsKey},
		{"payload changed", swapPayload(es256.Refresh("c"), `{"jti":"d"}`), esKey},
		{"nil key", es256.Refresh("c"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok, err := dbsc.Parse(c.jwt, dbsc.Type)
			if err != nil {
				t.Fatal(err)
			}
			if err := tok.Verify(c.key); !errors.Is(err, dbsc.ErrSignature) {
				t.Errorf("Verify = %v, want ErrSignature", err)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	jwk, _ := json.Marshal(es256.JWK())
	withJWK := func(change func(map[string]string)) map[string]string {
		m := es256.JWK()
		change(m)
		return m
	}
	for _, c := range []struct{ name, jwt string }{
		{"empty", ""},
		{"alg none", b64(`{"alg":"none","typ":"dbsc+jwt","jwk":`+string(jwk)+`}`) + "." + b64(`{"jti":"c"}`) + "."},
		{"alg HS256", es256.Sign(map[string]any{"alg": "HS256", "typ": "dbsc+jwt"}, map[string]any{"jti": "c"})},
		{"alg RS256 with an EC jwk", es256.Sign(map[string]any{"alg": "RS256", "typ": "dbsc+jwt", "jwk": es256.JWK()}, map[string]any{"jti": "c"})},
		{"alg ES256 with an RSA jwk", rs256.Sign(map[string]any{"alg": "ES256", "typ": "dbsc+jwt", "jwk": rs256.JWK()}, map[string]any{"jti": "c"})},
		{"no typ", es256.Sign(map[string]any{"alg": "ES256"}, map[string]any{"jti": "c"})},
		{"typ JWT", es256.Sign(map[string]any{"alg": "ES256", "typ": "JWT"}, map[string]any{"jti": "c"})},
		{"no jti", es256.Sign(map[string]any{"alg": "ES256", "typ": "dbsc+jwt"}, map[string]any{})},
		{"empty jti", es256.Refresh("")},
		{"null jti", es256.Sign(map[string]any{"alg": "ES256", "typ": "dbsc+jwt"}, map[string]any{"jti": nil})},
		{"crit", es256.Sign(map[string]any{"alg": "ES256", "typ": "dbsc+jwt", "crit": []string{"b64"}}, map[string]any{"jti": "c"})},
		{"private jwk", es256.Sign(map[string]any{"alg": "ES256", "typ": "dbsc+jwt", "jwk": withJWK(func(m map[string]string) { m["d"] = "AQ" })}, map[string]any{"jti": "c"})},
		{"jwk kty oct", es256.Sign(map[string]any{"alg": "ES256", "typ": "dbsc+jwt", "jwk": map[string]string{"kty": "oct", "k": "AQ"}}, map[string]any{"jti": "c"})},
		{"jwk on P-384", es256.Sign(map[string]any{"alg": "ES256", "typ": "dbsc+jwt", "jwk": withJWK(func(m map[string]string) { m["crv"] = "P-384" })}, map[string]any{"jti": "c"})},
		{"jwk point off the curve", es256.Sign(map[string]any{"alg": "ES256", "typ": "dbsc+jwt", "jwk": withJWK(func(m map[string]string) { m["x"] = m["y"] })}, map[string]any{"jti": "c"})},
		{"jwk x empty", es256.Sign(map[string]any{"alg": "ES256", "typ": "dbsc+jwt", "jwk": withJWK(func(m map[string]string) { m["x"] = "" })}, map[string]any{"jti": "c"})},
		{"jwk null", es256.Sign(map[string]any{"alg": "ES256", "typ": "dbsc+jwt", "jwk": nil}, map[string]any{"jti": "c"})},
		{"header padded", strings.Replace(es256.Refresh("c"), ".", "=.", 1)},
		{"header not JSON", b64("alg") + "." + b64(`{"jti":"c"}`) + ".AA"},
		{"signature not base64url", es256.Refresh("c") + "+"},
		{"two parts", b64(`{"alg":"ES256","typ":"dbsc+jwt"}`) + "." + b64(`{"jti":"c"}`)},
		{"oversized", es256.Sign(map[string]any{"alg": "ES256", "typ": "dbsc+jwt"}, map[string]any{"jti": strings.Repeat("c", dbsc.MaxJWT)})},
	} {
		t.Run(c.name, func(t *testing.T) {
			if tok, err := dbsc.Parse(c.jwt, dbsc.Type); !errors.Is(err, dbsc.ErrMalformed) {
				t.Errorf("Parse = %+v, %v; want ErrMalformed", tok, err)
			}
		})
	}
}

// A 1024-bit RSA key, an exponent of 1 or an even one, and a modulus with
// a leading zero byte are refused; so are EC coordinates over 32 bytes.
// Shorter EC coordinates are padded.
func TestParseJWK(t *testing.T) {
	t.Parallel()
	n1024 := new(big.Int).Lsh(big.NewInt(1), 1023)
	n1024.Add(n1024, big.NewInt(1))
	rsa1024 := `{"kty":"RSA","e":"AQAB","n":"` + base64.RawURLEncoding.EncodeToString(n1024.Bytes()) + `"}`
	n4097 := new(big.Int).Lsh(big.NewInt(1), 4096)
	n4097.Add(n4097, big.NewInt(1))
	rsa4097 := `{"kty":"RSA","e":"AQAB","n":"` + base64.RawURLEncoding.EncodeToString(n4097.Bytes()) + `"}`
	for _, c := range []struct {
		name string
		jwk  map[string]string
		raw  string
		ok   bool
	}{
		{name: "RSA 2048", jwk: rs256.JWK(), ok: true},
		{name: "RSA 1024", raw: rsa1024},
		{name: "RSA e=1", jwk: with(rs256.JWK(), "e", "AQ")},
		{name: "RSA e=65536", jwk: with(rs256.JWK(), "e", "AQAA")},
		// Costlier to verify, and never what a browser sends.
		{name: "RSA e=3", jwk: with(rs256.JWK(), "e", "Aw")},
		{name: "RSA e=2^31-1", jwk: with(rs256.JWK(), "e", "f____w")},
		{name: "RSA 4097 bits", raw: rsa4097},
		{name: "RSA n with a leading zero", jwk: with(rs256.JWK(), "n", "AA"+rs256.JWK()["n"])},
		{name: "EC", jwk: es256.JWK(), ok: true},
		{name: "EC x of 33 bytes", jwk: with(es256.JWK(), "x", base64.RawURLEncoding.EncodeToString(append([]byte{0}, decode(t, es256.JWK()["x"])...)))},
		{name: "EC no y", jwk: with(es256.JWK(), "y", "")},
		{name: "not JSON", raw: `{"kty":`},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := []byte(c.raw)
			if c.jwk != nil {
				raw, _ = json.Marshal(c.jwk)
			}
			_, err := dbsc.ParseJWK(raw)
			if (err == nil) != c.ok {
				t.Errorf("ParseJWK(%s) = %v, want ok %v", raw, err, c.ok)
			}
		})
	}
}

func with(m map[string]string, k, v string) map[string]string {
	m[k] = v
	return m
}

func decode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t *testing.T, jwt string) *dbsc.JWT {
	t.Helper()
	tok, err := dbsc.Parse(jwt, dbsc.Type)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// asn1ish replaces an ES256 signature with a DER-shaped one of 70 bytes,
// as a signer that forgot the JWS form would send.
func asn1ish(t *testing.T, jwt string) string {
	t.Helper()
	i := strings.LastIndexByte(jwt, '.')
	sig := decode(t, jwt[i+1:])
	der := append([]byte{0x30, 68, 0x02, 32}, sig[:32]...)
	der = append(der, 0x02, 32)
	der = append(der, sig[32:]...)
	return jwt[:i+1] + base64.RawURLEncoding.EncodeToString(der)
}

func truncateSig(t *testing.T, jwt string, n int) string {
	t.Helper()
	i := strings.LastIndexByte(jwt, '.')
	return jwt[:i+1] + base64.RawURLEncoding.EncodeToString(decode(t, jwt[i+1:])[:n])
}

func swapPayload(jwt, payload string) string {
	parts := strings.Split(jwt, ".")
	return parts[0] + "." + b64(payload) + "." + parts[2]
}

// FuzzParse feeds arbitrary tokens to Parse and, for what it accepts, to
// Verify with a fixed key and with the token's own: no panic, an error
// wrapping ErrMalformed for every refusal, and no token over MaxJWT, with
// an empty jti, or with an alg other than ES256 and RS256 accepted.
func FuzzParse(f *testing.F) {
	f.Add(es256.Registration("challenge"))
	f.Add(rs256.Registration("challenge"))
	f.Add(es256.Refresh("challenge"))
	f.Add(rs256.Refresh("challenge"))
	f.Add(b64(`{"alg":"none","typ":"dbsc+jwt"}`) + "." + b64(`{"jti":"c"}`) + ".")
	f.Add("..")
	// A key that signed none of the seeds.
	stored := mustParseF(f, dbsctest.NewES256().Registration("x")).Key
	f.Fuzz(func(t *testing.T, token string) {
		tok, err := dbsc.Parse(token, dbsc.Type)
		if err != nil {
			if !errors.Is(err, dbsc.ErrMalformed) {
				t.Fatalf("Parse error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if len(token) > dbsc.MaxJWT || tok.JTI == "" || (tok.Alg != dbsc.ES256 && tok.Alg != dbsc.RS256) {
			t.Fatalf("Parse accepted %q as %+v", token, tok)
		}
		if tok.Key != nil {
			if dbsc.AlgOf(tok.Key) != tok.Alg {
				t.Fatalf("a %s token with a key for %s", tok.Alg, dbsc.AlgOf(tok.Key))
			}
			if _, err := dbsc.MarshalJWK(tok.Key); err != nil {
				t.Fatalf("an accepted jwk does not marshal: %v", err)
			}
			_ = tok.Verify(tok.Key)
		}
		if err := tok.Verify(stored); err == nil {
			t.Fatalf("%q verifies with a key whose owner never signed it", token)
		}
	})
}

func mustParseF(f *testing.F, jwt string) *dbsc.JWT {
	tok, err := dbsc.Parse(jwt, dbsc.Type)
	if err != nil {
		f.Fatal(err)
	}
	return tok
}
