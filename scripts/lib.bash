# Shell functions for scripts/with-dynalite and scripts/demo, which source
# this file from the repository's root after set -euo pipefail. It is not a
# command of its own.
#
# A signal sent to such a script's PID alone, as an IDE's stop button,
# timeout and `kill $!` send it, must stop the script and everything it
# started. Bash runs a trap only once its foreground command has ended, so
# a script that runs a server in the foreground never gets to its trap: the
# commands here run in the background instead, and the script waits for
# them with the wait builtin, which a signal interrupts.
#
# Sourcing this file sets the script's traps: on SIGINT, SIGTERM or SIGHUP
# it passes the signal on to the command that run_forwarding runs and
# keeps waiting for it, or exits at once if there is none; on exit it stops
# dynalite and removes $scratch, a temporary directory for the script.

scratch=
dynalite_pid=
child_pid=
starting= # set while a background process starts and its PID is not known yet
received= # the first signal the script got
signals=0 # how many it got

on_signal() {
  received=${received:-$1}
  signals=$((signals + 1))
  if [ -n "$child_pid" ]; then
    kill -s "$1" "$child_pid" 2>/dev/null || true
  elif [ -z "$starting" ]; then
    exit $((128 + $(kill -l "$1")))
  fi
}

on_exit() {
  # Cleaning up is bounded: a second signal must not cut it short.
  trap '' INT TERM HUP
  stop_dynalite
  if [ -n "$scratch" ]; then rm -rf "$scratch"; fi
}

trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP
trap on_exit EXIT
scratch=$(mktemp -d)

# exit_if_signalled exits, as the signal would have, if the script got one:
# a script asked to stop starts nothing new.
exit_if_signalled() {
  if [ -n "$received" ]; then
    exit $((128 + $(kill -l "$received")))
  fi
}

# run_forwarding runs a command until it exits, and returns its exit
# status. A SIGINT, SIGTERM or SIGHUP that the script gets meanwhile goes on
# to the command, which may shut down gracefully: the script waits for it.
# The command keeps the script's stdin and process group, so at a terminal
# it can read input and Ctrl-C reaches it directly too.
run_forwarding() {
  exit_if_signalled
  local status=0
  starting=1
  # Bash starts a background command with SIGINT and SIGQUIT ignored, and
  # they would stay ignored in a command that does not catch them, such as
  # go test; the subshell restores them.
  (trap - INT QUIT TERM HUP && exec "$@") <&0 &
  child_pid=$!
  starting=
  if [ -n "$received" ]; then
    kill -s "$received" "$child_pid" 2>/dev/null || true
  fi
  local seen
  while :; do
    seen=$signals
    status=0
    wait "$child_pid" || status=$?
    # wait returns early, with 128 plus the signal's number, when a trap
    # ran: the command may still be running, so wait again. Once it has
    # ended, wait returns its status, however often it is asked.
    if [ "$signals" = "$seen" ]; then
      break
    fi
  done
  child_pid=
  return "$status"
}

# start_dynalite starts the pinned dynalite on a free loopback port, first
# installing it with npm ci if need be, and exports AWS_ENDPOINT_URL_DYNAMODB
# (the SDK's own variable) pointing at it, with a region and dummy
# credentials unless they are set. Its tables live in memory only; it stops
# when the script exits.
start_dynalite() {
  # dynalite's one pin and its start script live with the Go test helpers.
  local pin=internal/ddbtest/dynalite
  if [ ! -d "$pin/node_modules/dynalite" ] || [ "$pin/package-lock.json" -nt "$pin/node_modules/.package-lock.json" ]; then
    run_forwarding npm ci --prefix "$pin" --no-audit --no-fund --loglevel=error
  fi
  exit_if_signalled
  local portfile="$scratch/dynalite-port"
  starting=1
  node "$pin/dynalite.js" >"$portfile" &
  dynalite_pid=$!
  starting=
  exit_if_signalled
  for _ in $(seq 100); do
    [ -s "$portfile" ] && break
    kill -0 "$dynalite_pid" 2>/dev/null || { echo "dynalite failed to start" >&2; exit 1; }
    sleep 0.1
  done
  local port
  port=$(head -n1 "$portfile")
  [ -n "$port" ] || { echo "dynalite did not report a port" >&2; exit 1; }

  export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$port"
  export AWS_REGION="${AWS_REGION:-us-east-1}"
  export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-local}"
  export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-local}"
  echo "dynalite listening on $AWS_ENDPOINT_URL_DYNAMODB" >&2
}

# stop_dynalite stops dynalite, if it runs, and waits for it: five seconds
# for it to close its server, then it is killed.
stop_dynalite() {
  [ -n "$dynalite_pid" ] || return 0
  kill "$dynalite_pid" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "$dynalite_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$dynalite_pid" 2>/dev/null || true
  wait "$dynalite_pid" 2>/dev/null || true
  dynalite_pid=
}
