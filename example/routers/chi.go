package main

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/ddbsession/ddbsession"
)

// chiRouter: chi takes net/http middleware as it is. r.Use guards every
// route registered after it in its group; r.With(sessions.RequireSession)
// guards a single route instead.
func chiRouter(sessions *ddbsession.Manager[User]) http.Handler {
	r := chi.NewRouter()
	r.Use(http.NewCrossOriginProtection().Handler)
	r.Get("/", home)
	r.Post("/login", login(sessions))
	r.Post("/logout", logout(sessions))
	r.Group(func(r chi.Router) {
		r.Use(sessions.RequireSession)
		r.Get("/me", me(sessions))
	})
	return r
}
