# Shell functions for scripts/with-dynalite, scripts/with-moto and
# scripts/demo, which source this file from the repository's root after
# set -euo pipefail. It is not a command of its own.
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
# the engine (dynalite or moto) and removes $scratch, a temporary directory
# for the script.

scratch=
engine_pid=
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
  stop_engine
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
# installing it with npm ci if need be; see start_engine for what it exports
# and prints. Its tables live in memory only; it stops when the script exits.
start_dynalite() {
  # dynalite's one pin and its start script live with the Go test helpers.
  local pin=internal/ddbtest/dynalite
  if [ ! -d "$pin/node_modules/dynalite" ] || [ "$pin/package-lock.json" -nt "$pin/node_modules/.package-lock.json" ]; then
    run_forwarding npm ci --prefix "$pin" --no-audit --no-fund --loglevel=error
  fi
  start_engine dynalite node "$pin/dynalite.js"
}

# moto_server_py serves moto (github.com/getmoto/moto, the Python library
# of AWS fakes, whose server answers DynamoDB's API) on a free loopback
# port, and prints the port on its first line, as dynalite.js does. The
# request log is left out: it would drown the command's own output.
moto_server_py='
import logging, signal, sys
from werkzeug.serving import make_server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
logging.getLogger("werkzeug").setLevel(logging.ERROR)
server = make_server("127.0.0.1", 0, DomainDispatcherApplication(create_backend_app), threaded=True)
print(server.server_port, flush=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
server.serve_forever()
'

# start_moto starts moto's server, as installed for python3 (with its server
# extras: pip install "moto[server]"), on a free loopback port; see
# start_engine for what it exports and prints. Its tables live in memory
# only; it stops when the script exits.
start_moto() {
  if ! python3 -c 'import moto.moto_server.werkzeug_app' 2>/dev/null; then
    echo "moto is not installed for $(command -v python3 || echo python3): pip install 'moto[server]'" >&2
    exit 1
  fi
  start_engine moto python3 -c "$moto_server_py"
}

# start_engine NAME COMMAND... runs COMMAND, an engine that prints the
# loopback port it listens on as its first line, in the background, and
# exports AWS_ENDPOINT_URL_DYNAMODB (the SDK's own variable) pointing at it,
# with a region and dummy credentials unless they are set. It says on
# stderr where the engine listens, and the export line that gives a second
# shell the same environment (leaving out credentials of the caller's own).
start_engine() {
  local name=$1
  shift
  exit_if_signalled
  local portfile="$scratch/$name-port"
  starting=1
  "$@" >"$portfile" &
  engine_pid=$!
  starting=
  exit_if_signalled
  # A minute at most: moto takes a few seconds to import on a busy machine.
  for _ in $(seq 600); do
    [ -s "$portfile" ] && break
    kill -0 "$engine_pid" 2>/dev/null || { echo "$name failed to start" >&2; exit 1; }
    sleep 0.1
  done
  local port
  port=$(head -n1 "$portfile")
  [ -n "$port" ] || { echo "$name did not report a port" >&2; exit 1; }

  local exports=(AWS_ENDPOINT_URL_DYNAMODB AWS_REGION)
  [ -n "${AWS_ACCESS_KEY_ID:-}" ] || exports+=(AWS_ACCESS_KEY_ID)
  [ -n "${AWS_SECRET_ACCESS_KEY:-}" ] || exports+=(AWS_SECRET_ACCESS_KEY)
  export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$port"
  export AWS_REGION="${AWS_REGION:-us-east-1}"
  export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-local}"
  export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-local}"
  echo "$name listening on $AWS_ENDPOINT_URL_DYNAMODB" >&2
  local line=export variable
  for variable in "${exports[@]}"; do
    line+=" $variable=$(printf %q "${!variable}")"
  done
  local who="a second shell"
  [ ${#exports[@]} -eq 4 ] || who+=" with this shell's AWS credentials"
  printf 'for %s, while it runs:\n  %s\n' "$who" "$line" >&2
}

# stop_engine stops the engine, if it runs, and waits for it: five seconds
# for it to close its server, then it is killed.
stop_engine() {
  [ -n "$engine_pid" ] || return 0
  kill "$engine_pid" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "$engine_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$engine_pid" 2>/dev/null || true
  wait "$engine_pid" 2>/dev/null || true
  engine_pid=
}
