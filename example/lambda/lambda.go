package main

import (
	"context"
	"maps"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"
)

// functionHandler serves h to Function URL invocations (payload 2.0, the
// URL's InvokeMode RESPONSE_STREAM) through lambdaurl, which turns the
// event into an *http.Request and streams the response back; Set-Cookie
// headers become the response's cookies.
//
// lambdaurl takes the request's cookies from its "cookie" header only,
// while payload 2.0 also carries them in the event's cookies: where an
// event has them there alone, they are put in the header, so that the
// session cookie is never lost on its way.
func functionHandler(h http.Handler) func(context.Context, *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	wrapped := lambdaurl.Wrap(h)
	return func(ctx context.Context, req *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
		if len(req.Cookies) > 0 && !hasHeader(req.Headers, "cookie") {
			withCookies := *req
			withCookies.Headers = maps.Clone(req.Headers)
			if withCookies.Headers == nil {
				withCookies.Headers = map[string]string{}
			}
			withCookies.Headers["cookie"] = strings.Join(req.Cookies, "; ")
			req = &withCookies
		}
		return wrapped(ctx, req)
	}
}

func hasHeader(headers map[string]string, name string) bool {
	for k := range headers {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}
