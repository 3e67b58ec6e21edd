package dbsc_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/ddbsession/ddbsession/internal/dbsc"
	"github.com/ddbsession/ddbsession/internal/dbsc/dbsctest"
)

// TestThumbprint checks RFC 7638's example (section 3.1) and that one key
// has one thumbprint whichever way its JWK was written.
func TestThumbprint(t *testing.T) {
	key, err := dbsc.ParseJWK([]byte(`{"kty":"RSA","e":"AQAB","alg":"RS256","kid":"2011-04-29","n":"` +
		`0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := dbsc.Thumbprint(key); err != nil || got != "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs" {
		t.Fatalf("Thumbprint = %q, %v; want RFC 7638's NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs", got, err)
	}
	d := dbsctest.NewES256()
	jwk := d.JWK()
	a, _ := dbsc.ParseJWK(mustJSON(t, jwk))
	jwk["kid"] = "extra members do not count"
	b, _ := dbsc.ParseJWK(mustJSON(t, jwk))
	ta, _ := dbsc.Thumbprint(a)
	tb, _ := dbsc.Thumbprint(b)
	if ta != tb || ta != d.Thumbprint() {
		t.Fatalf("thumbprints %q, %q; the client computes %q", ta, tb, d.Thumbprint())
	}
}

// TestParseDPoP checks a proof's claims and the refusals of the form.
func TestParseDPoP(t *testing.T) {
	d := dbsctest.NewES256()
	header := map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": d.JWK()}
	claims := map[string]any{"jti": "j1", "htm": "GET", "htu": "https://a.example/x", "iat": 1700000000, "ath": "h", "nonce": "n"}
	p, err := dbsc.Parse(d.Sign(header, claims), dbsc.TypeDPoP)
	if err != nil {
		t.Fatal(err)
	}
	if p.JTI != "j1" || p.HTM != "GET" || p.HTU != "https://a.example/x" || p.IAT != 1700000000 || p.ATH != "h" || p.Nonce != "n" || p.Verify(p.Key) != nil {
		t.Fatalf("parsed %+v", p)
	}
	without := func(m map[string]any, k string) map[string]any {
		out := map[string]any{}
		for key, v := range m {
			if key != k {
				out[key] = v
			}
		}
		return out
	}
	for name, token := range map[string]string{
		"a DBSC token":     d.Sign(without(header, "typ"), claims),
		"typ dbsc+jwt":     d.Sign(map[string]any{"typ": "dbsc+jwt", "alg": "ES256", "jwk": d.JWK()}, claims),
		"no jwk":           d.Sign(without(header, "jwk"), claims),
		"no htm":           d.Sign(header, without(claims, "htm")),
		"no htu":           d.Sign(header, without(claims, "htu")),
		"no iat":           d.Sign(header, without(claims, "iat")),
		"no jti":           d.Sign(header, without(claims, "jti")),
		"alg none":         d.Sign(map[string]any{"typ": "dpop+jwt", "alg": "none", "jwk": d.JWK()}, claims),
		"alg HS256":        d.Sign(map[string]any{"typ": "dpop+jwt", "alg": "HS256", "jwk": d.JWK()}, claims),
		"a private key":    d.Sign(map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": d.PrivateJWK()}, claims),
		"iat not a number": d.Sign(header, map[string]any{"jti": "j1", "htm": "GET", "htu": "https://a.example/x", "iat": "1700000000"}),
	} {
		if _, err := dbsc.Parse(token, dbsc.TypeDPoP); !errors.Is(err, dbsc.ErrMalformed) {
			t.Errorf("%s: Parse = %v, want ErrMalformed", name, err)
		}
	}
}

// FuzzParseDPoP feeds arbitrary proofs to Parse: no panic, ErrMalformed
// for every refusal, and no proof accepted without its key, htm, htu, iat
// and jti, or that verifies with a key other than its own.
func FuzzParseDPoP(f *testing.F) {
	d := dbsctest.NewES256()
	f.Add(d.Sign(map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": d.JWK()},
		map[string]any{"jti": "j", "htm": "GET", "htu": "https://a.example/", "iat": 1700000000, "ath": "x", "nonce": "n"}))
	f.Add(b64(`{"alg":"none","typ":"dpop+jwt"}`) + "." + b64(`{"jti":"c"}`) + ".")
	f.Add("..")
	other := mustParseF(f, dbsctest.NewES256().Registration("x")).Key
	f.Fuzz(func(t *testing.T, token string) {
		p, err := dbsc.Parse(token, dbsc.TypeDPoP)
		if err != nil {
			if !errors.Is(err, dbsc.ErrMalformed) {
				t.Fatalf("Parse error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if p.Key == nil || p.JTI == "" || p.HTM == "" || p.HTU == "" || p.IAT <= 0 || dbsc.AlgOf(p.Key) != p.Alg {
			t.Fatalf("Parse accepted %q as %+v", token, p)
		}
		if _, err := dbsc.Thumbprint(p.Key); err != nil {
			t.Fatalf("an accepted key has no thumbprint: %v", err)
		}
		if err := p.Verify(other); err == nil {
			t.Fatalf("%q verifies with a key whose owner never signed it", token)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkDPoPProof is the CPU of one proof's check as a request makes
// it: parse, verify with its own key, and thumbprint.
func BenchmarkDPoPProof(b *testing.B) {
	d := dbsctest.NewES256()
	proof := d.Sign(map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": d.JWK()},
		map[string]any{"jti": "j", "htm": "GET", "htu": "https://a.example/api/me", "iat": 1700000000, "ath": "x", "nonce": "n"})
	b.ReportAllocs()
	for b.Loop() {
		p, err := dbsc.Parse(proof, dbsc.TypeDPoP)
		if err == nil {
			err = p.Verify(p.Key)
		}
		if err != nil {
			b.Fatal(err)
		}
		if _, err := dbsc.Thumbprint(p.Key); err != nil {
			b.Fatal(err)
		}
	}
}
