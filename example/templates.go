package main

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"

	"github.com/ddbsession/ddbsession"
)

//go:embed templates/*.html
var templateFiles embed.FS

// Each page is the shared layout plus its own "content" block.
var (
	indexTemplate = parsePage("templates/index.html")
	errorTemplate = parsePage("templates/error.html")
)

func parsePage(content string) *template.Template {
	funcs := template.FuncMap{"device": deviceName}
	return template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", content))
}

// indexData is what the index page shows: User is nil for a visitor.
// Next is the page the forms send a visitor back to once signed in.
type indexData struct {
	User     *User
	Sessions []ddbsession.Session
	Next     string
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

// errorPage answers code with a page that shows msg and a way back.
func (a *app) errorPage(w http.ResponseWriter, code int, msg string) {
	a.render(w, code, errorTemplate, struct {
		Status  string
		Message string
	}{http.StatusText(code), msg})
}
