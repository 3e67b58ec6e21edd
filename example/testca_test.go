package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test. A browser that
// trusts it validates the app's certificate as it would a real one, which
// device binding needs: Chromium does not bind sessions on a connection
// whose certificate errors it was told to ignore.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte // cert, PEM-encoded
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          randomSerial(t),
		Subject:               pkix.Name{CommonName: "ddbsession example test CA " + now.Format(time.RFC3339Nano)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a server certificate for hosts, names or IP addresses,
// signed by the CA, and its certificate and key PEM-encoded.
func (ca *testCA) issue(t *testing.T, hosts ...string) (cert tls.Certificate, certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: randomSerial(t),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			template.IPAddresses = append(template.IPAddresses, ip)
		} else {
			template.DNSNames = append(template.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	cert, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert, certPEM, keyPEM
}

// issueFiles is issue, with the certificate and key written to files in a
// temporary directory, as -tls-cert and -tls-key take them.
func (ca *testCA) issueFiles(t *testing.T, hosts ...string) (certFile, keyFile string) {
	t.Helper()
	_, certPEM, keyPEM := ca.issue(t, hosts...)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// pool is a certificate pool that trusts only the CA, for Go clients.
func (ca *testCA) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

func randomSerial(t *testing.T) *big.Int {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return serial
}

// goClient is a plain Go HTTP client that trusts the test CA and sends
// fixed cookies, without a jar, as a thief replays copied cookies. It
// follows no redirects.
type goClient struct {
	t       *testing.T
	client  *http.Client
	base    string
	cookies []*http.Cookie
}

func newGoClient(t *testing.T, ca *testCA, base string, cookies ...*http.Cookie) *goClient {
	return &goClient{
		t: t,
		client: &http.Client{
			Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool()}},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Timeout:       30 * time.Second,
		},
		base:    base,
		cookies: cookies,
	}
}

func (c *goClient) send(r *http.Request) *http.Response {
	c.t.Helper()
	for _, ck := range c.cookies {
		r.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	res, err := c.client.Do(r)
	if err != nil {
		c.t.Fatalf("%s %s: %v", r.Method, r.URL.Path, err)
	}
	// The body is read in full, so that the connection is reused and the
	// caller need not close it.
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", r.Method, r.URL.Path, err)
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res
}

func (c *goClient) get(path string) *http.Response {
	c.t.Helper()
	r, _ := http.NewRequest("GET", c.base+path, nil)
	return c.send(r)
}

func (c *goClient) postForm(path string, form url.Values) *http.Response {
	c.t.Helper()
	r, _ := http.NewRequest("POST", c.base+path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.send(r)
}
