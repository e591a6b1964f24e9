#!/usr/bin/env bash
# tools/check_layers fails on a forbidden include: a copy of the controller's
# sources passes, then fails once its core includes the store, and the
# message names the file, the line, both layers and the header.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/tools"
cp "$src/tools/layers.txt" "$tmp/tools/"
(cd "$src" && { git ls-files -z -- controller common/spec 2>/dev/null ||
  find controller common/spec -type f -print0; } | xargs -0 cp --parents -t "$tmp")

fail() { echo "FAIL: $*"; exit 1; }
"$src/tools/check_layers" --root "$tmp" >"$tmp/out" || fail "the copy, unchanged: $(cat "$tmp/out")"

header="$tmp/controller/core/decisions.h"
echo '#include "controller/store/store.h"' >>"$header"
line=$(wc -l <"$header")
rc=0
"$src/tools/check_layers" --root "$tmp" >"$tmp/out" 2>"$tmp/err" || rc=$?
[[ $rc == 1 ]] || fail "exit $rc, expected 1"
want="controller/core/decisions.h:$line: controller_core may not include controller_store"
want+=" (controller/store/store.h)"
grep -qxF "$want" "$tmp/out" || fail "no line '$want' in: $(cat "$tmp/out")"
[[ $(wc -l <"$tmp/out") == 1 ]] || fail "more than the one include reported: $(cat "$tmp/out")"
echo "refused: $(cat "$tmp/out")"

# A test source may include what its layer's tests may; production code may not.
echo '#include "controller/rpc/convert.h"' >"$tmp/controller/app/new_part.cc"
echo '#include "controller/rpc/convert.h"' >"$tmp/controller/app/new_part_test.cc"
"$src/tools/check_layers" --root "$tmp" >"$tmp/out" 2>&1 && fail "passed with app including rpc"
grep -qF "controller/app/new_part.cc:1: controller_app may not include controller_rpc" "$tmp/out" ||
  fail "app -> rpc not named: $(cat "$tmp/out")"
grep -qF "new_part_test.cc" "$tmp/out" && fail "a test of app refused its rpc include"
echo "refused: $(head -1 "$tmp/out")"
echo PASS
