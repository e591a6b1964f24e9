#!/usr/bin/env bash
# Two unprivileged Unix users made by the test (as root permission bits prove
# nothing): the first runs a controller; the second cannot list, submit,
# cancel, read logs of or quarantine through it, neither on its unix socket
# nor over TCP, even with the first's USER and LOGNAME: exit 4 and a message
# that says why. The first uses it on the socket and, with its token, over
# TCP. File modes are checked as the owner sees them and as the other user.
set -euo pipefail
: "${TRELLIS_BIN:?set TRELLIS_BIN to the bin directory of a build}"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to make two users"; exit 77; }
command -v useradd >/dev/null && command -v runuser >/dev/null ||
  { echo "SKIP: useradd/runuser missing"; exit 77; }

A=trellis-test-owner B=trellis-test-other
WORK=$(mktemp -d /tmp/trellis-2u.XXXXXX)
CTL_PID=""
log() { echo "[$(date +%H:%M:%S)] $*"; }
fail() {
  echo "FAIL: $*" >&2
  [ -f "$WORK/controller.log" ] && tail -20 "$WORK/controller.log" >&2
  exit 1
}
drop_user() {  # USER: its processes (runuser does not pass TERM on) and the user go
  pkill -KILL -u "$1" 2>/dev/null || true
  for _ in $(seq 50); do pgrep -u "$1" >/dev/null || break; sleep 0.1; done
  userdel -r "$1" >/dev/null 2>&1 || true
}
cleanup() {
  [ -n "$CTL_PID" ] && kill "$CTL_PID" 2>/dev/null
  for u in $A $B; do id "$u" >/dev/null 2>&1 && drop_user "$u"; done
  [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
for u in $A $B; do
  id "$u" >/dev/null 2>&1 && drop_user "$u"
  useradd -m -s /bin/bash "$u"
  chmod 700 "/home/$u"
done
# The build may sit under a directory only root can enter: the users get a copy.
chmod 755 "$WORK"
cp "$TRELLIS_BIN/trellis" "$TRELLIS_BIN/trellis-controller" "$WORK/"
chmod 755 "$WORK/trellis" "$WORK/trellis-controller"

as() {  # USER CMD...: a login-less shell of USER, HOME set, no runtime dir
  local u=$1; shift
  runuser -u "$u" -- env -i PATH=/usr/bin:/bin HOME="/home/$u" USER="$u" LOGNAME="$u" "$@"
}

as $A "$WORK/trellis-controller" --listen 127.0.0.1:0 --port-file "/home/$A/port" \
  --db "/home/$A/trellis.db" --output-root "/home/$A/runs" --metrics-listen off \
  >"$WORK/controller.log" 2>&1 &
CTL_PID=$!
for _ in $(seq 100); do [ -s "/home/$A/port" ] && break; sleep 0.1; done
[ -s "/home/$A/port" ] || fail "the controller did not start"
TCP=127.0.0.1:$(cat "/home/$A/port")
SOCK=/home/$A/.trellis/controller.sock
log "controller of $A on $SOCK and $TCP"

# The owner, on the default socket and over TCP with its token.
as $A "$WORK/trellis" ls >/dev/null || fail "$A cannot list on its own socket"
as $A "$WORK/trellis" --addr "$TCP" ls >/dev/null || fail "$A cannot list over TCP with its token"

expect_refused() {  # WHY-PATTERN CMD...: run as B with A's name; exit 4 and the reason
  local pattern=$1; shift
  local out rc=0
  out=$(runuser -u $B -- env -i PATH=/usr/bin:/bin HOME=/home/$B USER=$A LOGNAME=$A \
    "$WORK/trellis" "$@" 2>&1) || rc=$?
  [ "$rc" = 4 ] || fail "$B: trellis $* exited $rc, expected 4: $out"
  grep -q "$pattern" <<<"$out" || fail "$B: trellis $*: no '$pattern' in: $out"
}
echo '[job]
name = "intruder"
command = "id"' >"$WORK/intruder.toml"
chmod 644 "$WORK/intruder.toml"
for addr in "unix:$SOCK" "$TCP"; do
  why="only with a token"
  [ "$addr" = "unix:$SOCK" ] && why="only its owner"
  expect_refused "$why" --addr "$addr" ls
  expect_refused "$why" --addr "$addr" submit "$WORK/intruder.toml"
  expect_refused "$why" --addr "$addr" cancel hello-1
  expect_refused "$why" --addr "$addr" logs hello-1
  expect_refused "$why" --addr "$addr" quarantine node1 --reason "mine now"
  log "$B refused on $addr (ls, submit, cancel, logs, quarantine)"
done
out=$(runuser -u $B -- env -i PATH=/usr/bin:/bin HOME=/home/$B TRELLIS_TOKEN=not-the-owners-token \
  "$WORK/trellis" --addr "$TCP" ls 2>&1) && fail "$B listed with a made-up token"
grep -q "not one this controller knows" <<<"$out" || fail "made-up token: $out"
as $B cat "/home/$A/.config/trellis/token" >/dev/null 2>&1 && fail "$B read $A's token"
as $B cat "/home/$A/trellis.db" >/dev/null 2>&1 && fail "$B read $A's database"
as $B ls "/home/$A/runs" >/dev/null 2>&1 && fail "$B listed $A's run directories"

# A team sharing A's controller (--tokens-file): B, given a user token, sees
# and cancels only its own runs; A (the owner, an admin) sees all.
pkill -u $A -f trellis-controller || true  # runuser does not pass TERM on
wait "$CTL_PID" 2>/dev/null || true
for _ in $(seq 50); do pgrep -u $A -f trellis-controller >/dev/null || break; sleep 0.1; done
TEAM_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
as $A sh -c "umask 077; echo '$TEAM_TOKEN other user' > /home/$A/team-tokens"
rm -f "/home/$A/port"
as $A "$WORK/trellis-controller" --listen 127.0.0.1:0 --port-file "/home/$A/port" \
  --db "/home/$A/trellis.db" --output-root "/home/$A/runs" --metrics-listen off \
  --tokens-file "/home/$A/team-tokens" >>"$WORK/controller.log" 2>&1 &
CTL_PID=$!
for _ in $(seq 100); do [ -s "/home/$A/port" ] && break; sleep 0.1; done
[ -s "/home/$A/port" ] || fail "the controller did not start with a tokens file"
TCP=127.0.0.1:$(cat "/home/$A/port")
as_member() {  # CMD...: B with its team token, over TCP
  runuser -u $B -- env -i PATH=/usr/bin:/bin HOME=/home/$B TRELLIS_TOKEN="$TEAM_TOKEN" \
    "$WORK/trellis" --addr "$TCP" "$@"
}
b_run=$(as_member submit "$WORK/intruder.toml") || fail "$B could not submit with its token"
a_run=$(as $A "$WORK/trellis" submit "$WORK/intruder.toml") || fail "$A could not submit"
b_sees=$(as_member ls --json | python3 -c 'import json,sys; print(" ".join(r["run_id"] for r in json.load(sys.stdin)))')
[ "$b_sees" = "$b_run" ] || fail "$B sees '$b_sees', expected only $b_run"
a_sees=$(as $A "$WORK/trellis" ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$a_sees" = 2 ] || fail "$A (admin) sees $a_sees runs, expected 2"
rc=0; out=$(as_member cancel "$a_run" 2>&1) || rc=$?
[ "$rc" = 4 ] && grep -q "is not other's" <<<"$out" || fail "$B cancelling $a_run: exit $rc: $out"
as_member cancel "$b_run" >/dev/null || fail "$B could not cancel its own run"
log "team: $B (user) sees and cancels only $b_run; $A (admin) sees both"

# Modes, as the owner made them (umask 077).
mode() { stat -c %a "$1"; }
[ "$(mode "/home/$A/.config/trellis/token")" = 600 ] || fail "token mode $(mode "/home/$A/.config/trellis/token")"
[ "$(mode "/home/$A/.trellis")" = 700 ] || fail "socket directory mode $(mode "/home/$A/.trellis")"
[ "$(mode "/home/$A/trellis.db")" = 600 ] || fail "database mode $(mode "/home/$A/trellis.db")"
[ "$(mode "/home/$A/runs")" = 700 ] || fail "output root mode $(mode "/home/$A/runs")"
log "PASS: $B refused everywhere with exit 4; $A served on its socket and over TCP; modes 600/700"
