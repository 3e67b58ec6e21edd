package ddbsession

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ddbsession/ddbsession/internal/dbsc"
	"github.com/ddbsession/ddbsession/internal/item"
)

// This file holds DPoP (RFC 9449), which binds a bearer session to a key
// of its client: the proof that a request or a login carries, checked
// against the request before any DynamoDB call and against the session
// after its read; the nonces the server hands out, which a MAC over a
// window of time makes checkable without storage; and the cache of the
// proofs this instance has seen, which bounds their replay. See
// docs/dpop.md.

// The windows of a proof's freshness.
const (
	// dpopNonceWindow is how long one nonce is handed out: a nonce made in
	// one window is accepted in it and the next, so for one to two windows.
	dpopNonceWindow = time.Minute
	// dpopProofAge bounds how old a proof's iat may be, and dpopClockSkew
	// how far ahead of this instance's clock its client's may be.
	dpopProofAge  = 2 * time.Minute
	dpopClockSkew = time.Minute
	// maxProofsSeen bounds the replay cache: some 16 MB. Each proof stays
	// in it until its nonce (or, at a login, its iat) lets no copy in, at
	// most 3 minutes: some 1,500 DPoP requests a second per instance. A
	// full cache refuses proofs, with StoreUnavailable, rather than forget
	// one that a copy might replay.
	maxProofsSeen = 1 << 18
	// maxLoginProofsSeen bounds the login proofs' cache, apart from the
	// requests': a login's proof is remembered before its credential is
	// checked, so anyone can fill it, and a full one must refuse only
	// logins with a proof, never a signed-in client's requests.
	maxLoginProofsSeen = 1 << 16
)

// dpopAlgs is the algs parameter of a DPoP challenge: what Verify checks.
const dpopAlgs = dbsc.ES256 + " " + dbsc.RS256

// errProofCacheFull fails a request closed when the replay cache is full.
var errProofCacheFull = errors.New("ddbsession: the DPoP replay cache is full")

// ErrInvalidDPoPProof is returned by [Manager.LoginBearer] for a missing or
// invalid DPoP proof: answer 400 "invalid_dpop_proof" (RFC 9449 section 5).
var ErrInvalidDPoPProof = errors.New("ddbsession: invalid DPoP proof")

// dpopRefusal is ErrNoSession for a request that a DPoP check refused: the
// error code of its WWW-Authenticate challenge (RFC 9449 section 7.1).
type dpopRefusal struct{ code, description string }

func (e *dpopRefusal) Error() string        { return ErrNoSession.Error() + ": " + e.description }
func (e *dpopRefusal) Is(target error) bool { return target == ErrNoSession }

func badProof(format string, args ...any) error {
	return &dpopRefusal{"invalid_dpop_proof", fmt.Sprintf(format, args...)}
}

var (
	errUseNonce     = &dpopRefusal{"use_dpop_nonce", "the proof needs the server's current nonce"}
	errNotDPoPBound = &dpopRefusal{"invalid_token", "the token is not DPoP-bound: send it as Bearer"}
	errDPoPBound    = &dpopRefusal{"invalid_token", "the token is DPoP-bound: send it as DPoP, with a proof"}
)

// headerDPoPNonce carries a nonce to the client (RFC 9449 section 8).
const headerDPoPNonce = "DPoP-Nonce"

// challenge tells a bearer request that err refused what to do: a DPoP
// check's error, with a fresh nonce for use_dpop_nonce; invalid_token in
// the scheme the request used otherwise.
func (d *dpop) challenge(w http.ResponseWriter, r *http.Request, err error, now time.Time) {
	var refusal *dpopRefusal
	_, isDPoP, _ := bearerToken(r)
	switch {
	case errors.As(err, &refusal):
		if refusal == errUseNonce {
			w.Header().Set(headerDPoPNonce, d.nonce(now))
		}
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`DPoP error=%q, error_description=%q, algs=%q`,
			refusal.code, strings.Map(headerSafe, refusal.description), dpopAlgs))
	case isDPoP:
		w.Header().Set("WWW-Authenticate", `DPoP error="invalid_token", algs="`+dpopAlgs+`"`)
	default:
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
}

// headerSafe keeps a description, which may quote what the client sent,
// a plain quoted-string: printable ASCII without quotes or backslashes.
func headerSafe(r rune) rune {
	if r < ' ' || r > '~' || r == '"' || r == '\\' {
		return '\''
	}
	return r
}

// dpop checks DPoP proofs for a Manager.
type dpop struct {
	keys    [][]byte   // DeviceBinding.DPoPNonceKeys: the first makes nonces, each checks them
	require bool       // DeviceBinding.RequireDPoP
	https   bool       // the htu's scheme: https, unless Cookie.InsecureDevMode
	seen    proofCache // requests' proofs
	logins  proofCache // logins' proofs
}

func newDPoP(d DeviceBinding, https bool) *dpop {
	keys := d.DPoPNonceKeys
	if len(keys) == 0 {
		keys = [][]byte{make([]byte, minNonceKey)}
		rand.Read(keys[0]) // this instance's alone: see DeviceBinding.DPoPNonceKeys
	}
	return &dpop{keys: keys, require: d.RequireDPoP, https: https, seen: proofCache{max: maxProofsSeen, seen: map[[16]byte]int64{}},
		logins: proofCache{max: maxLoginProofsSeen, seen: map[[16]byte]int64{}}}
}

// dpopProof is what a checked proof leaves for the session's check.
type dpopProof struct {
	thumbprint string   // of its key (RFC 7638)
	id         [16]byte // its key and jti, hashed: the replay cache's key
	until      int64    // when no copy of it is accepted any more, epoch seconds
	renew      bool     // its nonce is the last window's: send the current one
}

// login checks the DPoP proof of a bearer login, if it carries one or one
// is required, and returns its key's thumbprint ("" for none), or an error
// that is ErrInvalidDPoPProof. The proof counts as seen: a copy of it signs
// nobody in on this instance.
func (d *dpop) login(r *http.Request, now time.Time) (string, error) {
	if _, sent := r.Header["Dpop"]; !sent && !d.require {
		return "", nil
	}
	p, err := d.check(r, "", now)
	if err == nil {
		err = d.logins.first(p, now)
	}
	if errors.Is(err, errProofCacheFull) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidDPoPProof, err)
	}
	return p.thumbprint, nil
}

// check checks r's DPoP proof at now, before any DynamoDB call: its form,
// its signature by the key it carries, its method, URL and age, and,
// unless at a login, the access token's hash and the server's nonce. A
// login (token "") needs no nonce: its proof only binds the new session to
// the proof's own key, and a copy of it is no use without the credential
// the login's request carries too.
func (d *dpop) check(r *http.Request, token string, now time.Time) (*dpopProof, error) {
	values := r.Header.Values("DPoP")
	if len(values) != 1 {
		return nil, badProof("want one DPoP header, not %d", len(values))
	}
	p, err := dbsc.Parse(values[0], dbsc.TypeDPoP)
	if err == nil {
		err = p.Verify(p.Key)
	}
	if err != nil {
		return nil, badProof("%v", err)
	}
	switch age := now.Unix() - p.IAT; {
	case p.HTM != r.Method:
		return nil, badProof("htm %q is not this request's method", p.HTM)
	case !d.htuFits(p.HTU, r):
		return nil, badProof("htu %q is not this request's URL", p.HTU)
	case age > int64(dpopProofAge/time.Second) || -age > int64(dpopClockSkew/time.Second):
		return nil, badProof("iat is %ds from this server's clock", -age)
	}
	jkt, err := dbsc.Thumbprint(p.Key)
	if err != nil {
		return nil, badProof("%v", err)
	}
	out := &dpopProof{thumbprint: jkt, until: p.IAT + int64(dpopProofAge/time.Second)}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		if p.ATH != base64.RawURLEncoding.EncodeToString(sum[:]) {
			return nil, badProof("ath is not the token's hash")
		}
		window, key, ok := d.nonceWindow(p.Nonce)
		current := now.Unix() / int64(dpopNonceWindow/time.Second)
		if !ok || window < current-1 || window > current {
			return nil, errUseNonce
		}
		out.renew = window < current || key > 0
		out.until = min(out.until, (window+2)*int64(dpopNonceWindow/time.Second))
	}
	// A login's proofs are remembered apart from requests': a bearer
	// re-authentication's request proves its session with the proof its
	// LoginBearer then binds the new session with.
	use := "request "
	if token == "" {
		use = "login "
	}
	id := sha256.Sum256([]byte(use + jkt + "." + p.JTI))
	copy(out.id[:], id[:])
	return out, nil
}

// accept decides whether proof p (nil for none) may present session s at
// now, once s is read: a bound session needs a proof of its own key, which
// must be the first copy of that proof this instance sees, and a session
// that is not bound takes none.
func (d *dpop) accept(s item.Session, p *dpopProof, now time.Time) error {
	switch {
	case !s.DPoP && p == nil:
		return nil
	case !s.DPoP:
		return errNotDPoPBound
	case p == nil:
		return errDPoPBound
	case s.DPoPKey == "" || subtle.ConstantTimeCompare([]byte(p.thumbprint), []byte(s.DPoPKey)) != 1:
		return badProof("the proof's key is not the one the token is bound to")
	}
	return d.seen.first(p, now)
}

// nonce is the nonce of now's window: the window, and a MAC of it under
// the first key, base64url.
func (d *dpop) nonce(now time.Time) string {
	var b [8 + 16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.Unix()/int64(dpopNonceWindow/time.Second)))
	copy(b[8:], nonceMAC(d.keys[0], b[:8]))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// nonceWindow returns the window of nonce n, and which of the keys made
// it, if one did.
func (d *dpop) nonceWindow(n string) (window int64, key int, ok bool) {
	var b [8 + 16]byte
	if base64.RawURLEncoding.EncodedLen(len(b)) != len(n) {
		return 0, 0, false
	}
	if _, err := base64.RawURLEncoding.Strict().Decode(b[:], []byte(n)); err != nil {
		return 0, 0, false
	}
	for i, k := range d.keys {
		if hmac.Equal(b[8:], nonceMAC(k, b[:8])) {
			return int64(binary.BigEndian.Uint64(b[:8])), i, true
		}
	}
	return 0, 0, false
}

func nonceMAC(key, window []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("ddbsession DPoP nonce\x00"))
	mac.Write(window)
	return mac.Sum(nil)[:16]
}

// htuFits reports whether htu names r's URL as RFC 9449 4.3 compares them:
// scheme, host and path, without query and fragment, after RFC 3986's
// syntax- and scheme-based normalisation. The scheme is https unless
// InsecureDevMode serves plain HTTP, the host is the Host header's, and the
// path the request line's, which http.StripPrefix leaves as it came: a
// proxy in front must pass on both.
func (d *dpop) htuFits(htu string, r *http.Request) bool {
	u, err := url.Parse(htu)
	if err != nil || u.Opaque != "" || u.User != nil {
		return false
	}
	scheme := "http"
	if d.https || r.TLS != nil {
		scheme = "https"
	}
	path := r.URL.EscapedPath()
	if sent, err := url.ParseRequestURI(r.RequestURI); err == nil {
		path = sent.EscapedPath()
	}
	return strings.EqualFold(u.Scheme, scheme) &&
		strings.EqualFold(withoutDefaultPort(u.Host, scheme), withoutDefaultPort(r.Host, scheme)) &&
		normalPath(u.EscapedPath()) == normalPath(path)
}

func withoutDefaultPort(host, scheme string) string {
	if scheme == "https" {
		return strings.TrimSuffix(host, ":443")
	}
	return strings.TrimSuffix(host, ":80")
}

// normalPath is an escaped path with "/" for none, its percent-encoded
// unreserved characters decoded and its other escapes in upper case.
func normalPath(p string) string {
	if p == "" {
		return "/"
	}
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		hi, okHi := unhex(p, i+1)
		lo, okLo := unhex(p, i+2)
		if p[i] != '%' || !okHi || !okLo {
			b.WriteByte(p[i])
			continue
		}
		if c := hi<<4 | lo; unreserved(c) {
			b.WriteByte(c)
		} else {
			b.WriteString(strings.ToUpper(p[i : i+3]))
		}
		i += 2
	}
	return b.String()
}

// unhex is the value of the hex digit at p[i], if there is one.
func unhex(p string, i int) (byte, bool) {
	if i >= len(p) {
		return 0, false
	}
	switch c := p[i]; {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0
}

// proofCache remembers the proofs this instance accepted until no copy of
// them could be accepted any more (see dpopProof.until).
type proofCache struct {
	max   int // how many proofs it holds at most
	mu    sync.Mutex
	seen  map[[16]byte]int64
	swept int64 // when the last sweep ran, epoch seconds
}

// first records proof p at now, or says why it cannot: this instance has
// seen it, or the cache is full of proofs still live.
func (c *proofCache) first(p *dpopProof, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if until, ok := c.seen[p.id]; ok && until >= now.Unix() {
		return badProof("the proof was used before")
	}
	if len(c.seen) >= c.max && c.swept < now.Unix() {
		c.swept = now.Unix()
		for id, until := range c.seen {
			if until < now.Unix() {
				delete(c.seen, id)
			}
		}
	}
	if len(c.seen) >= c.max {
		return errProofCacheFull
	}
	c.seen[p.id] = p.until
	return nil
}
