// Command dpopclient is a CLI of the example app's API whose session is
// bound to a key of its own with DPoP (RFC 9449): a copy of its token,
// without the key, is refused. It keeps the key in a file (made on first
// use, mode 0600, by default in the user's configuration directory) and,
// beside it, the token and the last nonce the server sent (key file +
// ".session").
//
//	go run ./dpopclient -server http://127.0.0.1:8080 login alice <<<'correct horse'
//	go run ./dpopclient -server http://127.0.0.1:8080 get /api/sessions
//
// Each request carries "Authorization: DPoP <token>" and a new proof: a
// JWT signed with the key over the request's method and URL, the token's
// hash and the server's nonce. A 401 with error="use_dpop_nonce" brings a
// nonce to retry with, once; any answer's DPoP-Nonce header is kept for
// the next request. See docs/dpop.md.
package main

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	server := flag.String("server", "http://127.0.0.1:8080", "the example app's URL")
	keyFile := flag.String("key", defaultKeyFile(), "the client's private key, made on first use")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: dpopclient [flags] login USERNAME (the password on stdin) | get PATH")
		flag.PrintDefaults()
	}
	flag.Parse()
	out, err := run(*server, *keyFile, flag.Args(), os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dpopclient:", err)
		os.Exit(1)
	}
	fmt.Println(out)
}

// defaultKeyFile is dpop-key.pem in the user's configuration directory
// (~/.config/ddbsession-example on Linux).
func defaultKeyFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "dpop-key.pem"
	}
	return filepath.Join(dir, "ddbsession-example", "dpop-key.pem")
}

// run does one command and returns what to print.
func run(server, keyFile string, args []string, stdin io.Reader) (string, error) {
	c, err := open(server, keyFile)
	if err != nil {
		return "", err
	}
	switch {
	case len(args) == 2 && args[0] == "login":
		password, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && err != io.EOF {
			return "", err
		}
		return c.login(args[1], strings.TrimRight(password, "\r\n"))
	case len(args) == 2 && args[0] == "get":
		return c.get(args[1])
	}
	return "", errors.New("want: login USERNAME, or get PATH")
}

// client is the key, and the session state kept beside it.
type client struct {
	server    string
	key       *ecdsa.PrivateKey
	statePath string
	state     struct{ Token, Nonce string }
}

func open(server, keyFile string) (*client, error) {
	key, err := loadKey(keyFile)
	if err != nil {
		return nil, err
	}
	c := &client{server: strings.TrimSuffix(server, "/"), key: key, statePath: keyFile + ".session"}
	if b, err := os.ReadFile(c.statePath); err == nil {
		if err := json.Unmarshal(b, &c.state); err != nil {
			return nil, fmt.Errorf("%s: %v", c.statePath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return c, nil
}

// loadKey reads the P-256 key in path, or makes one there, readable by
// its owner alone.
func loadKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return key, pem.Encode(f, &pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "EC PRIVATE KEY" {
		return nil, fmt.Errorf("%s: not an EC PRIVATE KEY in PEM", path)
	}
	return x509.ParseECPrivateKey(block.Bytes)
}

func (c *client) save() error {
	b, err := json.Marshal(c.state)
	if err != nil {
		return err
	}
	return os.WriteFile(c.statePath, b, 0o600)
}

// login signs in at POST /api/login with a proof, which binds the new
// session to the key, and keeps the token.
func (c *client) login(username, password string) (string, error) {
	body, _ := json.Marshal(map[string]string{"username": username, "password": password})
	c.state.Token = "" // a login proves the key; it has no token yet
	code, answer, err := c.send("POST", "/api/login", body)
	if err != nil {
		return "", err
	}
	var token struct {
		Token     string `json:"token"`
		TokenType string `json:"tokenType"`
	}
	if code != http.StatusOK || json.Unmarshal(answer, &token) != nil || token.TokenType != "DPoP" {
		return "", fmt.Errorf("login: %d %s", code, answer)
	}
	c.state.Token = token.Token
	return "signed in; the token is bound to this key", c.save()
}

// get sends GET path with the token and a proof.
func (c *client) get(path string) (string, error) {
	if c.state.Token == "" {
		return "", errors.New("not signed in: login first")
	}
	code, answer, err := c.send("GET", path, nil)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d %s", path, code, answer)
	}
	return string(answer), nil
}

// send makes the request with a fresh proof and, told use_dpop_nonce,
// once more with the nonce it was given. Every nonce the server sends is
// kept for the next request.
func (c *client) send(method, path string, body []byte) (int, []byte, error) {
	for attempt := 0; ; attempt++ {
		r, err := http.NewRequest(method, c.server+path, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		if body != nil {
			r.Header.Set("Content-Type", "application/json")
		}
		if c.state.Token != "" {
			r.Header.Set("Authorization", "DPoP "+c.state.Token)
		}
		proof, err := c.proof(method, r.URL)
		if err != nil {
			return 0, nil, err
		}
		r.Header.Set("DPoP", proof)
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			return 0, nil, err
		}
		answer, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return 0, nil, err
		}
		if nonce := res.Header.Get("DPoP-Nonce"); nonce != "" {
			c.state.Nonce = nonce
			if err := c.save(); err != nil {
				return 0, nil, err
			}
		}
		if attempt == 0 && res.StatusCode == http.StatusUnauthorized &&
			strings.Contains(res.Header.Get("WWW-Authenticate"), `error="use_dpop_nonce"`) {
			continue
		}
		return res.StatusCode, answer, nil
	}
}

var b64 = base64.RawURLEncoding

// proof is a DPoP proof for method on u: the public key in the header,
// and the method, the URL without query and fragment, the time, a unique
// ID, the token's hash and the server's nonce in the claims, signed with
// ES256 (r and s, 32 bytes each).
func (c *client) proof(method string, u *url.URL) (string, error) {
	point, err := c.key.PublicKey.Bytes()
	if err != nil {
		return "", err
	}
	header, _ := json.Marshal(map[string]any{
		"typ": "dpop+jwt", "alg": "ES256",
		"jwk": map[string]string{"kty": "EC", "crv": "P-256", "x": b64.EncodeToString(point[1:33]), "y": b64.EncodeToString(point[33:])},
	})
	htu := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	claims := map[string]any{"jti": rand.Text(), "htm": method, "htu": htu.String(), "iat": time.Now().Unix()}
	if c.state.Token != "" {
		sum := sha256.Sum256([]byte(c.state.Token))
		claims["ath"] = b64.EncodeToString(sum[:])
	}
	if c.state.Nonce != "" {
		claims["nonce"] = c.state.Nonce
	}
	payload, _ := json.Marshal(claims)
	signed := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	digest := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, c.key, digest[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + b64.EncodeToString(sig), nil
}
