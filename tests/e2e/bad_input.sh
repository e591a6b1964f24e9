#!/usr/bin/env bash
# Bad specs are refused with exit code 2 and a message naming the field;
# nothing is stored.
. "$(dirname "$0")/lib.sh"

start_controller
expect_refused() {  # FILE MESSAGE
  local out rc=0
  out=$(trellis submit "$1" 2>&1) || rc=$?
  [ "$rc" = 2 ] || fail "submit $(basename "$1"): exit $rc, expected 2 ($out)"
  echo "$out" | grep -qF "$2" || fail "submit $(basename "$1"): '$out' lacks '$2'"
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
count=$(trellis ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$count" = 0 ] || fail "$count runs stored after bad submissions"
log "PASS: bad specs refused, nothing stored"
