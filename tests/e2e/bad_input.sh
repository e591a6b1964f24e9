#!/usr/bin/env bash
# Bad specs are refused with exit code 2 and a message naming the field;
# nothing is stored.
. "$(dirname "$0")/lib.sh"

start_controller
expect_refused() {  # FILE MESSAGE [KEY=VALUE...]
  local out rc=0 file=$1 message=$2
  shift 2
  out=$(trellis submit "$file" "$@" 2>&1) || rc=$?
  [ "$rc" = 2 ] || fail "submit $(basename "$file") $*: exit $rc, expected 2 ($out)"
  echo "$out" | grep -F >/dev/null "$message" || fail "submit $(basename "$file") $*: '$out' lacks '$message'"
}
cat >"$E2E_DIR/unknown.toml" <<'T'
[job]
name = "x"
command = "true"
[slurm]
nodez = 2
T
expect_refused "$E2E_DIR/unknown.toml" "slurm.nodez: unknown key"
printf '[job]\nname = "a/../b"\ncommand = "true"\n' >"$E2E_DIR/name.toml"
expect_refused "$E2E_DIR/name.toml" "job.name: must match [a-z0-9-]{1,63}"
printf '[job]\nname = "x"\ncommand = "true"\n[slurm]\nnodes = 0\n' >"$E2E_DIR/nodes.toml"
expect_refused "$E2E_DIR/nodes.toml" "slurm.nodes: must be an integer in [1, 16384], got 0"
printf '[job]\nname = "x"\n' >"$E2E_DIR/neither.toml"
expect_refused "$E2E_DIR/neither.toml" "it has neither"
printf '[job]\nname = "x"\ncommand = "true"\n[slurm]\nextra_args = ["--uid=0"]\n' >"$E2E_DIR/extra.toml"
expect_refused "$E2E_DIR/extra.toml" "is not an allowed sbatch option"
{ printf '[job]\nname = "x"\ncommand = "true"\n#'; head -c $((10 << 20)) /dev/zero | tr '\0' 'x'; } >"$E2E_DIR/big.toml"
expect_refused "$E2E_DIR/big.toml" "the limit is 1048576"
# Values over a good file, on the command line: each bad one named.
hello="$(cd "$(dirname "$0")/../.." && pwd)/examples/hello.toml"
expect_refused "$hello" "slurm.nodez: unknown key (did you mean nodes?)" slurm.nodez=1
expect_refused "$hello" "nodes=1: a key needs its section (SECTION.KEY=VALUE): did you mean slurm.nodes?" nodes=1
expect_refused "$hello" "slurm.nodes: must be an integer in [1, 16384], got 0" slurm.nodes=0
expect_refused "$hello" "job.name: must match [a-z0-9-]{1,63}" --name Big_Name
count=$(trellis ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$count" = 0 ] || fail "$count runs stored after bad submissions"
log "PASS: bad specs refused, nothing stored"
