package main

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/ddbsession/ddbsession"
)

// gorillaMuxRouter: a subrouter with its own middleware holds the guarded
// routes. gorilla/mux runs middleware only for a route that matched, so a
// path that matches none is a 404, never a 401.
func gorillaMuxRouter(sessions *ddbsession.Manager[User]) http.Handler {
	r := mux.NewRouter()
	r.Use(http.NewCrossOriginProtection().Handler)
	r.HandleFunc("/", home).Methods(http.MethodGet)
	r.HandleFunc("/login", login(sessions)).Methods(http.MethodPost)
	r.HandleFunc("/logout", logout(sessions)).Methods(http.MethodPost)

	signedIn := r.NewRoute().Subrouter()
	signedIn.Use(sessions.RequireSession)
	signedIn.HandleFunc("/me", me(sessions)).Methods(http.MethodGet)
	return r
}
