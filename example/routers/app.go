package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"

	"github.com/ddbsession/ddbsession"
)

// User is the user item, in the sessions table.
type User struct {
	PK   string `dynamodbav:"pk"`
	SK   string `dynamodbav:"sk"`
	Name string `dynamodbav:"name"`
}

func userKey(name string) ddbsession.UserKey {
	return ddbsession.UserKey{PK: "USER#" + name, SK: "PROFILE"}
}

// newSessions returns the one Manager that every router here is built
// around, with its table created and a user item for each of names.
func newSessions(ctx context.Context, cfg ddbsession.Config[User], names ...string) (*ddbsession.Manager[User], error) {
	sessions, err := ddbsession.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := sessions.CreateTable(ctx); err != nil {
		return nil, err
	}
	for _, name := range names {
		k := userKey(name)
		err := sessions.CreateUser(ctx, User{PK: k.PK, SK: k.SK, Name: name})
		if err != nil && !errors.Is(err, ddbsession.ErrUserExists) {
			return nil, fmt.Errorf("create user %q: %w", name, err)
		}
	}
	return sessions, nil
}

// demoPassword is every user's password here: this module is about
// routers, and checkPassword is a stand-in for the app's own check (the
// README's usage has bcrypt, example/password.go argon2id).
const demoPassword = "demo"

var errWrongPassword = errors.New("wrong password")

func checkPassword(_ User, password string) error {
	if subtle.ConstantTimeCompare([]byte(password), []byte(demoPassword)) != 1 {
		return errWrongPassword
	}
	return nil
}

// The handlers below are plain net/http, so that every router serves the
// same ones: chi and gorilla/mux take them as they are, echo through
// echo.WrapHandler and gin through gin.WrapF. Only GET /me is written in
// each router's own style, to show where the user is read.

func home(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintln(w, "public page: POST /login with name and password, then GET /me")
}

// login signs in with Login, which reads the user item and hands it to
// the check in one call, and sends the browser back where it was going.
func login(sessions *ddbsession.Manager[User]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		password := r.PostFormValue("password")
		err := sessions.Login(w, r, userKey(r.PostFormValue("name")), func(u User) error {
			return checkPassword(u, password)
		})
		switch {
		case errors.Is(err, ddbsession.ErrUserNotFound), errors.Is(err, errWrongPassword):
			http.Error(w, "wrong name or password", http.StatusUnauthorized)
		case err != nil:
			http.Error(w, "try again", http.StatusServiceUnavailable)
		default:
			http.Redirect(w, r, ddbsession.ReturnPath(r, "/me"), http.StatusSeeOther)
		}
	}
}

func logout(sessions *ddbsession.Manager[User]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := sessions.Logout(w, r); err != nil {
			http.Error(w, "the sign-out did not complete, try again", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, "/", http.StatusSeeOther)
	}
}

// me is GET /me for the routers that take net/http handlers.
func me(sessions *ddbsession.Manager[User]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		user, _ := sessions.User(r.Context())
		fmt.Fprintf(w, "signed in as %s\n", user.Name)
	}
}
