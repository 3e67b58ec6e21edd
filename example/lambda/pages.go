package main

import (
	"bytes"
	"html/template"
	"net/http"

	"github.com/ddbsession/ddbsession"
)

// pageData is what a page shows.
type pageData struct {
	User          *User
	Sessions      []ddbsession.Session
	Next          string // the page to go back to after a login
	LoginRequired bool   // a page needed a session
	Message       string // why the last form failed
	Status        int    // an error page's
}

// pages are the function's few pages: the example server's, without its
// styles and one-time codes.
var pages = template.Must(template.New("").Parse(`
{{define "head"}}<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>ddbsession on Lambda</title></head><body>{{end}}
{{define "index"}}{{template "head"}}
{{with .Message}}<p role="alert">{{.}}</p>{{end}}
{{if .User}}
<h1>Signed in as {{.User.Username}}</h1>
<form method="post" action="/logout"><button id="logout">Log out</button></form>
<form method="post" action="/logout-everywhere"><button id="logout-everywhere">Log out everywhere</button></form>
<h2>Where you're signed in</h2>
<table>{{range .Sessions}}<tr><td>{{.UserAgent}}{{if .Current}} (this browser){{end}}</td><td>{{.CreatedAt.Format "2006-01-02 15:04"}}</td><td><form method="post" action="/sessions/revoke"><input type="hidden" name="id" value="{{.ID}}"><button>Revoke</button></form></td></tr>{{end}}</table>
{{else}}
{{if .LoginRequired}}<p>Log in to see that page.</p>{{end}}
<h2>Sign up</h2>
<form id="signup-form" method="post" action="/signup{{with .Next}}?next={{.}}{{end}}">
<label>Username <input name="username" autocomplete="username" required maxlength="64"></label>
<label>Password <input type="password" name="password" autocomplete="new-password" required maxlength="1024"></label>
<label><input type="checkbox" name="remember" value="on"> Keep me signed in</label>
<button>Sign up</button></form>
<h2>Log in</h2>
<form id="login-form" method="post" action="/login{{with .Next}}?next={{.}}{{end}}">
<label>Username <input name="username" autocomplete="username" required maxlength="64"></label>
<label>Password <input type="password" name="password" autocomplete="current-password" required maxlength="1024"></label>
<label><input type="checkbox" name="remember" value="on"> Keep me signed in</label>
<button>Log in</button></form>
{{end}}</body></html>{{end}}
{{define "reauth"}}{{template "head"}}
<h1>Confirm it's you, {{.User.Username}}</h1>
{{with .Message}}<p role="alert">{{.}}</p>{{end}}
<form id="reauth-form" method="post" action="/reauth"><input type="hidden" name="next" value="{{.Next}}">
<label>Password <input type="password" name="password" autocomplete="current-password" required maxlength="1024" autofocus></label>
<button>Continue</button></form></body></html>{{end}}
{{define "error"}}{{template "head"}}<h1>{{.Status}}</h1><p>{{.Message}}</p><p><a href="/">Home</a></p></body></html>{{end}}
`))

// render writes page with data, or 500 if it cannot.
func render(w http.ResponseWriter, code int, page string, data pageData) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, page, data); err != nil {
		http.Error(w, "internal server error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	buf.WriteTo(w)
}

// errorPage answers code with a page saying msg.
func errorPage(w http.ResponseWriter, code int, msg string) {
	render(w, code, "error", pageData{Status: code, Message: msg})
}

// pageAnswer is errorPage as a handler, for the session guard's answers.
func pageAnswer(code int, msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { errorPage(w, code, msg) })
}
