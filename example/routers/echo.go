package main

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ddbsession/ddbsession"
)

// echoRouter: echo.WrapMiddleware runs net/http middleware with the rest
// of echo's chain inside it, on the request it passes on, so a refresh
// re-sends the cookie as under net/http. The guard is a route middleware:
// a group's middleware also runs for every unknown path under the group's
// prefix (echo routes those to the group for it), so a guarded group at ""
// would answer a signed-out visitor's 404s with 401s.
func echoRouter(sessions *ddbsession.Manager[User]) http.Handler {
	e := echo.New()
	e.Use(echo.WrapMiddleware(http.NewCrossOriginProtection().Handler))
	e.GET("/", echo.WrapHandler(http.HandlerFunc(home)))
	e.POST("/login", echo.WrapHandler(login(sessions)))
	e.POST("/logout", echo.WrapHandler(logout(sessions)))

	requireSession := echo.WrapMiddleware(sessions.RequireSession)
	e.GET("/me", func(c echo.Context) error {
		user, _ := sessions.User(c.Request().Context())
		return c.String(http.StatusOK, "signed in as "+user.Name+"\n")
	}, requireSession)
	return e
}
