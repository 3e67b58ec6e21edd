package ddbtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// Run runs a developer's command, a program rather than a test binary,
// with an engine in place, found or started as Main finds one, and returns
// its exit status: the way to run an app against a local engine from its
// own module's directory, with one command. The command gets the engine in
// AWS_ENDPOINT_URL_DYNAMODB and Main's dummy credentials and Region, so
// that it can reach no AWS account. It runs in a process group of its own,
// which a SIGINT, SIGTERM or SIGHUP to Run goes on to whole: "go run ." does
// not pass a signal on to the program it builds, and a server it started
// would keep its port. Run stops the command in the same way when its own
// parent exits, as "go run" of Run's command does on a SIGTERM. The engine
// stops once the command has exited.
func (h Harness) Run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintf(os.Stderr, "usage: %s command [argument...]\n", h.Name)
		return 2
	}
	isolateAWSConfig()
	endpoint := os.Getenv(endpointEnv)
	if endpoint == "" {
		var stop func()
		var err error
		endpoint, stop, err = h.startEngine()
		defer stop()
		if err != nil {
			fmt.Fprint(os.Stderr, h.instructions(err))
			return 1
		}
		os.Setenv(endpointEnv, endpoint)
	}
	if err := CheckEndpoint(endpoint); err != nil {
		fmt.Fprint(os.Stderr, h.instructions(err))
		return 1
	}
	fmt.Fprintf(os.Stderr, "%s: %s=%s\n", h.Name, endpointEnv, endpoint)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = ownGroup()
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", h.Name, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	orphaned := parentGone()
	for {
		select {
		case sig := <-signals:
			signalGroup(cmd.Process.Pid, sig.(syscall.Signal))
		case <-orphaned:
			// The go run that started this one is gone (a SIGTERM to it
			// alone, as an IDE's stop button sends, kills it and passes
			// nothing on): stop as if told to.
			signalGroup(cmd.Process.Pid, syscall.SIGTERM)
			orphaned = nil
		case err := <-done:
			var exit *exec.ExitError
			switch {
			case err == nil:
				return 0
			case errors.As(err, &exit) && exit.ExitCode() >= 0:
				return exit.ExitCode()
			case errors.As(err, &exit):
				return 1 // killed by a signal
			}
			fmt.Fprintf(os.Stderr, "%s: %v\n", h.Name, err)
			return 1
		}
	}
}

// parentGone returns a channel closed once this process's parent has
// exited (its parent process ID changes, to the reaper's); never on a
// system without one.
func parentGone() <-chan struct{} {
	gone := make(chan struct{})
	parent := os.Getppid()
	if parent <= 1 {
		return gone
	}
	go func() {
		for os.Getppid() == parent {
			time.Sleep(200 * time.Millisecond)
		}
		close(gone)
	}()
	return gone
}
