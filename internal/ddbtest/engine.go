package ddbtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// This file lets a harness's tests pick their engine, and says, where the
// engine lacks an operation, which engine it is and how to pick another.

// The engines a harness starts itself, as its <NAME>_ENGINE variable names
// them (DDBSESSIONTEST_ENGINE for package ddbsessiontest).
const (
	engineDynalite = "dynalite"
	engineMoto     = "moto"
)

// engineEnv is the variable that picks h's engine: DDBSESSIONTEST_ENGINE.
func (h Harness) engineEnv() string { return strings.ToUpper(h.Name) + "_ENGINE" }

// engine is what the tests of this binary run against, for messages: the
// engine Main started, or the endpoint it was given.
var engine string

// startMoto starts moto_server, from PATH, on a free loopback port, and
// returns its endpoint and a function that stops it. stop is never nil.
// On Linux the server dies with this process however it ends; elsewhere
// a test binary that is killed leaves it running.
func startMoto(ctx context.Context, logName string) (endpoint string, stop func(), err error) {
	noop := func() {}
	path, err := exec.LookPath("moto_server")
	if err != nil {
		return "", noop, fmt.Errorf("no moto_server on PATH (pip install 'moto[server]'): %v", err)
	}
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", "0")
	cmd.SysProcAttr = dieWithParent()
	out, err := cmd.StderrPipe()
	if err != nil {
		return "", noop, err
	}
	cmd.Stdout = cmd.Stderr // werkzeug says where it listens on either
	if err := cmd.Start(); err != nil {
		return "", noop, fmt.Errorf("starting %s: %w", path, err)
	}
	stop = func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	found := make(chan string, 1)
	go func() {
		listening := regexp.MustCompile(`Running on (http://127\.0\.0\.1:[0-9]+)`)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if m := listening.FindStringSubmatch(line); m != nil {
				found <- m[1]
				io.Copy(io.Discard, r) // its request log
				return
			}
			if err != nil {
				close(found)
				return
			}
		}
	}()
	select {
	case endpoint, ok := <-found:
		if !ok {
			stop()
			return "", noop, errors.New("moto_server exited before it listened")
		}
		fmt.Fprintf(os.Stderr, "%s: moto listening on %s\n", logName, endpoint)
		return endpoint, stop, nil
	case <-ctx.Done():
		stop()
		return "", noop, fmt.Errorf("moto_server did not start listening: %w", ctx.Err())
	}
}

// gaps are what each engine lacks, as its UnknownOperationException says.
var gaps = map[string]string{
	engineDynalite: "dynalite implements neither TransactWriteItems, TransactGetItems nor UpdateTimeToLive",
}

// explainUnknownOperation is a client middleware that rewrites the message
// of an UnknownOperationException, which a test engine answers for an
// operation it lacks (DynamoDB itself never does), to say which engine that
// is and how to pick another. The error keeps its code, and unwraps to the
// engine's own.
func (h Harness) explainUnknownOperation() middleware.DeserializeMiddleware {
	return middleware.DeserializeMiddlewareFunc("ddbtestExplainUnknownOperation", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleDeserialize(ctx, in)
		var api smithy.APIError
		if err == nil || !errors.As(err, &api) || api.ErrorCode() != "UnknownOperationException" {
			return out, md, err
		}
		op := middleware.GetOperationName(ctx)
		msg := fmt.Sprintf("%s: the test engine, %s, does not implement %s", h.Name, engine, op)
		if gap := gaps[engine]; gap != "" {
			msg += " (" + gap + ")"
		}
		msg += ". Run the tests against "
		if engine != engineMoto {
			msg += fmt.Sprintf("moto, which does: %s=%s go test ./... (moto_server on PATH: pip install 'moto[server]'), or against ", h.engineEnv(), engineMoto)
		}
		msg += fmt.Sprintf("an engine you start yourself: %s=http://127.0.0.1:8000 go test ./...", endpointEnv)
		return out, md, &engineGap{APIError: api, msg: msg, err: err}
	})
}

// engineGap is an UnknownOperationException that says what to do.
type engineGap struct {
	smithy.APIError
	msg string
	err error
}

func (e *engineGap) Error() string        { return e.msg }
func (e *engineGap) ErrorMessage() string { return e.msg }
func (e *engineGap) Unwrap() error        { return e.err }
