package main

import (
	"bytes"
	"cmp"
	"embed"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ddbsession/ddbsession"
)

//go:embed templates/*.html
var templateFiles embed.FS

// Each page is the shared layout plus its own "title" and "content"
// blocks.
var (
	indexTemplate  = parsePage("templates/index.html")
	errorTemplate  = parsePage("templates/error.html")
	reauthTemplate = parsePage("templates/reauth.html")
	codeTemplate   = parsePage("templates/code.html")
	totpTemplate   = parsePage("templates/totp.html")
	// confirmTemplate asks again for a sensitive action, one button away,
	// after a re-authentication (reauth.go).
	confirmTemplate = parsePage("templates/confirm.html")
)

func parsePage(content string) *template.Template {
	funcs := template.FuncMap{"device": deviceName, "methods": methodsInWords}
	return template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", content))
}

// indexData is what the index page shows: User is nil for a visitor.
// Next is the page the forms send a visitor back to once signed in, and
// LoginRequired says that a page which needs a session sent the visitor
// here. Failed is the sign-up or log-in form that was refused, shown again
// with its message.
type indexData struct {
	User          *User
	Sessions      []ddbsession.Session
	History       []ddbsession.Event // the newest page of the user's security history
	Next          string
	LoginRequired bool
	Failed        *failedForm
	// SSO is the provider's name for "Sign in with <SSO>", "" when single
	// sign-on is off.
	SSO string
	// place is appConfig.Place, or nil.
	place func(addr string) string
	// device is this browser's name for the user (DeviceOf), and now the
	// page's time: the new-device notice leaves out this browser's own,
	// and old ones.
	device string
	now    time.Time
}

// NewDevices are the sign-ins from devices new to the account, on the
// history's newest page, of the last newDeviceNotice but this browser's:
// the notice at the top of the account page, which asks "was this you?".
func (d indexData) NewDevices() []ddbsession.Event {
	var out []ddbsession.Event
	for _, e := range d.History {
		if e.Kind == ddbsession.EventNewDevice && e.Device != d.device && d.now.Sub(e.Time) < newDeviceNotice {
			out = append(out, e)
		}
	}
	return out
}

// Where is how the sessions list shows an address: the address, and the
// place the app's lookup names for it, if any; "unknown" for none.
func (d indexData) Where(addr string) string {
	if addr == "" {
		return "unknown"
	}
	if d.place != nil {
		if p := d.place(addr); p != "" {
			return addr + " (" + p + ")"
		}
	}
	return addr
}

// failedForm is a refused sign-up or log-in form ("signup" or "login"),
// with what was typed in it but the password.
type failedForm struct {
	Form     string
	Message  string
	Username string
	Remember bool
}

// Form is what the page shows in the form of that name: the failed one
// as it was sent, any other as new, with "keep me signed in" ticked.
func (d indexData) Form(name string) failedForm {
	if d.Failed != nil && d.Failed.Form == name {
		return *d.Failed
	}
	return failedForm{Form: name, Remember: true}
}

// AnyDeviceBound reports whether the sessions list has a device-bound
// session, which the page then explains.
func (d indexData) AnyDeviceBound() bool {
	return slices.ContainsFunc(d.Sessions, func(s ddbsession.Session) bool { return s.DeviceBound })
}

// historyWords are the history's words for what happened.
var historyWords = map[ddbsession.EventKind]string{
	ddbsession.EventCreated:         "Signed in",
	ddbsession.EventReauthenticated: "Confirmed it was you",
	ddbsession.EventAdopted:         "Moved over from the old sign-in",
	ddbsession.EventNewDevice:       "Signed in from a new device",
	ddbsession.EventSignInFailed:    "Failed sign-ins",
	ddbsession.EventEnded:           "Signed out",
	ddbsession.EventRevoked:         "A session was signed out",
	ddbsession.EventRevokedAll:      "Signed out everywhere",
	ddbsession.EventEvicted:         "A session ended: too many sessions",
	ddbsession.EventRevokedEveryone: "Everyone was signed out",
}

// What is how the history says what happened: "Signed in", or "3 failed
// sign-ins" for an hour's count.
func (d indexData) What(e ddbsession.Event) string {
	if e.Kind == ddbsession.EventSignInFailed {
		return plural(e.Count, "failed sign-in")
	}
	return cmp.Or(historyWords[e.Kind], string(e.Kind))
}

// methodWords are the sessions list's words for the methods a session's
// user signed in with.
var methodWords = map[string]string{methodPassword: "password", methodOTP: "one-time code", methodOIDC: "single sign-on"}

// methodsInWords is how the sessions list says how a session signed in:
// "password", or "password and one-time code".
func methodsInWords(methods []string) string {
	if len(methods) == 0 {
		return "not recorded" // a login that named no method
	}
	var words []string
	for _, m := range methods {
		if m == methodOIDCFresh {
			continue // a mark beside methodOIDC: the provider asked the user to log in
		}
		words = append(words, cmp.Or(methodWords[m], m))
	}
	return strings.Join(words, " and ")
}

// render writes the page in full or not at all: it executes into a buffer
// first, so a template error becomes a clean 500 and not half a page.
func (a *app) render(w http.ResponseWriter, code int, page *template.Template, data any) {
	var buf bytes.Buffer
	if err := page.ExecuteTemplate(&buf, "layout", data); err != nil {
		a.log.Error("render page", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// errorHeadings are the error page's headings, and titles, by status: what
// happened, in words, where the status text ("Conflict") says little.
var errorHeadings = map[int]string{
	http.StatusBadRequest:            "Please check the form",
	http.StatusUnauthorized:          "Wrong password",
	http.StatusForbidden:             "Request refused",
	http.StatusNotFound:              "Not found",
	http.StatusMethodNotAllowed:      "Not possible here",
	http.StatusConflict:              "Changed meanwhile",
	http.StatusRequestEntityTooLarge: "The form is too large",
	http.StatusTooManyRequests:       "Too many attempts",
	http.StatusInternalServerError:   "Something went wrong",
	http.StatusServiceUnavailable:    "Please try again shortly",
}

// errorPage answers code with a page that says what went wrong, in msg,
// and a way back. The forms where something is typed (sign-up, log-in)
// answer with formAnswer instead, which keeps what was typed.
func (a *app) errorPage(w http.ResponseWriter, code int, msg string) {
	heading, ok := errorHeadings[code]
	if !ok {
		heading = http.StatusText(code)
	}
	a.errorPageWith(w, code, heading, msg)
}

// errorPageWith is errorPage with a heading of the caller's.
func (a *app) errorPageWith(w http.ResponseWriter, code int, heading, msg string) {
	a.render(w, code, errorTemplate, struct{ Heading, Message string }{heading, msg})
}

// formAnswer answers a refused sign-up or log-in (form "signup" or
// "login") with the forms again: the message above the one that failed,
// and in it the username and "keep me signed in" as they were sent, so
// that nothing typed is lost but the password, whose field takes the focus
// (which also scrolls a phone, where the forms stack, to the one that
// failed). A password never goes back
// into a page, where it would sit in the page's source for anything that
// reads the page (an extension, a screenshot, a proxy's log).
func (a *app) formAnswer(r *http.Request, form string) answerFunc {
	return func(w http.ResponseWriter, code int, msg string) {
		a.render(w, code, indexTemplate, indexData{
			Next: ddbsession.ReturnPath(r, ""),
			SSO:  a.ssoName(),
			Failed: &failedForm{
				Form:     form,
				Message:  msg,
				Username: r.PostFormValue("username"),
				Remember: r.PostFormValue("remember") == "on",
			},
		})
	}
}
