package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDPoPClient runs the example's DPoP client (dpopclient) as a user
// would: its login binds the session to the key it keeps in a file, its
// requests prove the key and take the nonces they are sent, on this
// instance and another; and the token copied without the key is refused.
func TestDPoPClient(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, dev)
	ta.browser("browser-A").signup("alice", "correct horse")
	dir := t.TempDir()
	bin := filepath.Join(dir, "dpopclient")
	if out, err := exec.Command("go", "build", "-o", bin, "./dpopclient").CombinedOutput(); err != nil {
		t.Fatalf("go build ./dpopclient: %v\n%s", err, out)
	}
	key := filepath.Join(dir, "key.pem")
	cli := func(server string, stdin string, args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"-server", server, "-key", key}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := cli(ta.srv.URL, "correct horse\n", "login", "alice"); err != nil {
		t.Fatalf("login: %v\n%s", err, out)
	}
	if info, err := os.Stat(key); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the key file: %v, %v; want mode 0600", info, err)
	}
	other := ta.anotherInstance(dev)
	for _, server := range []string{ta.srv.URL, ta.srv.URL, other.srv.URL} {
		if out, err := cli(server, "", "get", "/api/me"); err != nil || !strings.Contains(out, "alice") {
			t.Errorf("get /api/me at %s: %v\n%s", server, err, out)
		}
	}

	// The token alone, as a thief would send it.
	state, err := os.ReadFile(key + ".session")
	if err != nil {
		t.Fatal(err)
	}
	token := strings.Split(strings.Split(string(state), `"Token":"`)[1], `"`)[0]
	for _, scheme := range []string{"Bearer", "DPoP"} {
		r, _ := http.NewRequest("GET", ta.srv.URL+"/api/me", nil)
		r.Header.Set("Authorization", scheme+" "+token)
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "DPoP error=") {
			t.Errorf("the token as %s without a proof: %d %q", scheme, res.StatusCode, res.Header.Get("WWW-Authenticate"))
		}
	}
}
