package ddbsession_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ddbsession/ddbsession"
)

// A credential has one documented form, <token>.<b64(userPK)>.<b64(userSK)>
// in unpadded base64url, so that each key has one form. Go's base64
// decoders skip '\r' and '\n', even in strict mode, so a credential with
// line breaks inside its user key must be refused as malformed, with no
// call, and not read as a second spelling of the same credential. A Cookie
// header cannot carry them (net/http drops such a cookie), but Check takes
// values that arrived some other way. FuzzCheck found this.
func TestCredentialWithLineBreaksIsMalformed(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	cookie := e.login(e.putUser("alice"))
	token, user, _ := strings.Cut(cookie.Value, ".")
	pk, sk, _ := strings.Cut(user, ".")
	for name, value := range map[string]string{
		"a newline at the end":          cookie.Value + "\n",
		"CRLF in the partition key":     token + "." + pk[:4] + "\r\n" + pk[4:] + "." + sk,
		"a newline before the sort key": token + "." + pk + ".\n" + sk,
	} {
		p.reset()
		s, _, err := e.m.Check(context.Background(), value)
		if !errors.Is(err, ddbsession.ErrNoSession) || p.total() != 0 {
			t.Errorf("%s (%q): Check = session %q, %v after %d calls; want ErrNoSession after 0", name, value, s.ID, err, p.total())
		}
	}
}
