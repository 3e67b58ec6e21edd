package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/gorilla/sessions"

	"github.com/ddbsession/ddbsession"
)

// This file is the app on ddbsession's own sessions, which takes over the
// browsers of the version before it, an app on gorilla/sessions'
// CookieStore (-from-gorilla): docs/migrate.md, "Adopting other sessions".

// gorillaCookie is the old version's cookie, and gorillaUser the value in
// it that names the user.
const (
	gorillaCookie = "session"
	gorillaUser   = "user"
)

// user is the app's user item.
type user struct {
	PK   string `dynamodbav:"pk"`
	SK   string `dynamodbav:"sk"`
	Name string `dynamodbav:"name"`
}

func userKey(name string) ddbsession.UserKey {
	return ddbsession.UserKey{PK: "USER#" + name, SK: "PROFILE"}
}

// note is what a session's data holds.
type note struct {
	Text string `json:"note"`
}

// newAdoptingApp returns the app's handler on ddbsession's sessions in
// cfg.Table, which signs in a browser with a cookie of the old version,
// signed with hashKey, of a user the table knows.
func newAdoptingApp(ctx context.Context, cfg appConfig, hashKey []byte) (http.Handler, error) {
	// Not "session", the old version's cookie, which it clears.
	cookie := ddbsession.Cookie{Name: "ddbsession", InsecureDevMode: cfg.Dev}
	m, err := ddbsession.New(ddbsession.Config[user]{Client: cfg.Client, Table: cfg.Table, Cookie: cookie})
	if err != nil {
		return nil, err
	}
	if err := m.CreateTable(ctx); err != nil {
		return nil, err
	}
	old := sessions.NewCookieStore(hashKey)
	adopt := m.Adopt(http.Cookie{Name: gorillaCookie, Path: "/"}, func(r *http.Request) (ddbsession.Adoption, bool, error) {
		s, err := old.Get(r, gorillaCookie)
		name, _ := s.Values[gorillaUser].(string)
		if err != nil || !validText(name, maxName) {
			// Not signed by hashKey, expired, or not signed in: the old
			// version vouches for no one.
			return ddbsession.Adoption{}, false, nil
		}
		return ddbsession.Adoption{User: userKey(name)}, true, nil
	})

	mux := http.NewServeMux()
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		name := r.PostFormValue("name")
		if !validText(name, maxName) {
			http.Error(w, fmt.Sprintf("form field name: want 1 to %d bytes of printable UTF-8", maxName), http.StatusBadRequest)
			return
		}
		// A demo signs anyone in, making the user at the first login; a
		// real app checks a password in Login's verify.
		key := userKey(name)
		if err := m.CreateUser(r.Context(), user{PK: key.PK, SK: key.SK, Name: name}); err != nil && !errors.Is(err, ddbsession.ErrUserExists) {
			http.Error(w, "session store unavailable, try again", http.StatusServiceUnavailable)
			return
		}
		if err := m.Login(w, r, key, nil); err != nil {
			http.Error(w, "session store unavailable, try again", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, "/me", http.StatusSeeOther)
	})
	mux.Handle("GET /me", m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := m.User(r.Context())
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, u.Name)
	})))
	mux.Handle("POST /note", m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		text := r.PostFormValue("text")
		if !validText(text, maxNote) {
			http.Error(w, fmt.Sprintf("form field text: want 1 to %d bytes of printable UTF-8", maxNote), http.StatusBadRequest)
			return
		}
		if err := m.UpdateData(r.Context(), func(json.RawMessage) (any, error) { return note{text}, nil }); err != nil {
			http.Error(w, "session store unavailable, try again", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, "/note", http.StatusSeeOther)
	})))
	mux.Handle("GET /note", m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := m.Session(r.Context())
		var n note
		if json.Unmarshal(s.Data, &n) != nil || n.Text == "" {
			http.Error(w, "no note in this session", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, n.Text)
	})))
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		if err := m.Logout(w, r); err != nil {
			http.Error(w, "session store unavailable, try again", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, "/me", http.StatusSeeOther)
	})
	return adopt(mux), nil
}
