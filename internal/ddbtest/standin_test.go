package ddbtest_test

import (
	"context"
	"errors"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// An answer stands in for the engine's answer to one operation: its
// output, or the error the engine would give.
type answer func(ctx context.Context, in any) (any, error)

// standIn returns a client of client's engine whose calls of the
// operations in answers never reach the engine: each is answered by its
// function at the start of the SDK's stack, before any request is sent or
// retried, and an error comes back as the SDK reports an engine's, in a
// *smithy.OperationError naming the operation. Every other call goes to
// the engine, and each call's operation is recorded in calls, in order.
func standIn(client *dynamodb.Client, answers map[string]answer) (_ *dynamodb.Client, calls func() []string) {
	var mu sync.Mutex
	var seen []string
	c := dynamodb.New(client.Options(), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("ddbtest.standIn", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				op := middleware.GetOperationName(ctx)
				mu.Lock()
				seen = append(seen, op)
				mu.Unlock()
				answer, ok := answers[op]
				if !ok {
					return next.HandleInitialize(ctx, in)
				}
				out, err := answer(ctx, in.Parameters)
				return middleware.InitializeOutput{Result: out}, middleware.Metadata{}, err
			}), middleware.After)
		})
	})
	return c, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// apiError is an error of the engine's with code, as the SDK decodes one
// it has no type for.
func apiError(code, message string) error {
	return &smithy.GenericAPIError{Code: code, Message: message, Fault: smithy.FaultClient}
}

// engineError is the engine's own error inside err, the SDK's report of
// a call: what a stand-in answers to make the SDK report it again, for
// its own operation.
func engineError(err error) error {
	var opErr *smithy.OperationError
	if errors.As(err, &opErr) {
		return opErr.Err
	}
	return err
}
