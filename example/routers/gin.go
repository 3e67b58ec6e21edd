package main

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ddbsession/ddbsession"
)

// ginRouter: gin has no adapter for net/http middleware, so ginMiddleware
// is one. Do not build a gin guard on Manager.Authenticate instead:
// Authenticate never refreshes, so every session would end IdleTimeout
// after its login however active its user.
func ginRouter(sessions *ddbsession.Manager[User]) http.Handler {
	r := gin.New()
	r.Use(gin.Recovery(), ginMiddleware(http.NewCrossOriginProtection().Handler))
	r.GET("/", gin.WrapF(home))
	r.POST("/login", gin.WrapF(login(sessions)))
	r.POST("/logout", gin.WrapF(logout(sessions)))

	signedIn := r.Group("/", ginMiddleware(sessions.RequireSession))
	signedIn.GET("/me", func(c *gin.Context) {
		user, _ := sessions.User(c.Request.Context())
		c.String(http.StatusOK, "signed in as %s\n", user.Name)
	})
	return r
}

// ginMiddleware runs a net/http middleware as gin middleware: the rest of
// gin's chain runs inside it, on the request it passes on (which carries
// the session and its user), so that whatever the middleware does around
// the chain, such as a refresh's cookie, still happens. When it answers
// by itself (a 401, a 503), the chain stops there. It suits middleware
// that passes the ResponseWriter on as it got it, as ddbsession's and
// http.CrossOriginProtection do: gin's handlers write to c.Writer.
func ginMiddleware(middleware func(http.Handler) http.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		reached := false
		middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			reached = true
			c.Request = r
			c.Next()
		})).ServeHTTP(c.Writer, c.Request)
		if !reached {
			c.Abort()
		}
	}
}
