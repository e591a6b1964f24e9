#!/usr/bin/env bash
# `trellis completion bash`, sourced in bash: a verb, a verb's flag, a run id
# (from `trellis ls --json`, here a stand-in for the controller) and a file
# complete; `completion zsh` is the same script behind zsh's bashcompinit.
set -euo pipefail
TRELLIS=${1:?usage: completion_test.sh PATH_TO_TRELLIS}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# A `trellis` first on PATH: `ls --json` as a controller with two runs would
# answer; anything else is the real one.
cat >"$dir/trellis" <<SH
#!/usr/bin/env bash
if [ "\$1" = ls ] && [ "\$2" = --json ]; then
  printf '[\n  {\n    "run_id": "hello-3",\n    "state": "RUNNING"\n  },\n  {\n    "run_id": "tiny-moe-7"\n  }\n]\n'
  exit 0
fi
exec "$TRELLIS" "\$@"
SH
chmod +x "$dir/trellis"
export PATH="$dir:$PATH"
touch "$dir/run.toml"

fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck disable=SC1090
source <("$TRELLIS" completion bash)
complete_words() {  # WORD...: COMPREPLY for the last word
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  _trellis
  echo "${COMPREPLY[*]}"
}
[ "$(complete_words trellis sh)" = show ] || fail "verb: '$(complete_words trellis sh)'"
[ "$(complete_words trellis re)" = "release report retry" ] || fail "verbs: '$(complete_words trellis re)'"
[ "$(complete_words trellis logs --ta)" = --tail ] || fail "flag: '$(complete_words trellis logs --ta)'"
[ "$(complete_words trellis show hel)" = hello-3 ] || fail "run id: '$(complete_words trellis show hel)'"
[ "$(complete_words trellis fork t)" = tiny-moe-7 ] || fail "run id: '$(complete_words trellis fork t)'"
[ "$(complete_words trellis submit "$dir/ru")" = "$dir/run.toml" ] || fail "file"
"$TRELLIS" completion zsh | grep -q "bashcompinit" || fail "zsh script"
"$TRELLIS" completion fish >/dev/null 2>&1 && fail "an unknown shell was accepted"
echo "PASS: verbs, flags, run ids and files complete"
