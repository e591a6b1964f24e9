#!/usr/bin/env bash
# Fuzzes every target (or those named) for a while each, one after another on
# one core, seeded with the kept corpus fuzz/corpus/<target>/. Afterwards the
# kept corpus is replaced by a minimized merge of itself and what the run found;
# crash inputs land in fuzz/crashes/<target>/ (replayed by fuzz_replay_test).
# Writes bench/results/fuzz-<date>.{md,json}.
#
#   fuzz/run.sh                  # every target, 600 s each
#   fuzz/run.sh -t 60 squeue     # one target, 60 s
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${TRELLIS_FUZZ_BUILD_DIR:-$REPO/build-fuzz}
ALL=(run_spec squeue scontrol sacct meminfo step_record corpus_header)
# Inputs bigger than this are not tried: real inputs are a few KiB. The step
# stream's bound is above one record's 4 KiB, so oversized lines are reached.
max_len() { if [ "$1" = step_record ]; then echo 9000; else echo 4096; fi; }

seconds=600
args=("$@")
while getopts "t:" opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    *) echo "usage: fuzz/run.sh [-t SECONDS] [TARGET...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${ALL[@]}")
for t in "${targets[@]}"; do
  [[ " ${ALL[*]} " == *" $t "* ]] || { echo "fuzz/run.sh: no target '$t' (${ALL[*]})" >&2; exit 2; }
done

bash "$REPO/fuzz/build.sh" >/dev/null
results="$BUILD/work/results.jsonl"
mkdir -p "$BUILD/work"
: >"$results"

for t in "${targets[@]}"; do
  bin="$BUILD/fuzz_$t"
  corpus="$REPO/fuzz/corpus/$t"
  crashes="$REPO/fuzz/crashes/$t"
  work="$BUILD/work/$t"
  rm -rf "$work"
  mkdir -p "$work/new" "$work/merged" "$corpus" "$crashes"
  ls "$crashes" >"$work/crashes-before"
  len=$(max_len "$t")
  echo "fuzz/run.sh: $t for $seconds s"

  # A crash ends libFuzzer: start it again (from the grown corpus) until the time
  # is spent, so one finding does not hide the next. At most 20 starts.
  left=$seconds seg=0
  while [ "$left" -gt 0 ] && [ "$seg" -lt 20 ]; do
    seg=$((seg + 1))
    start=$SECONDS
    rc=0
    "$bin" -max_total_time="$left" -max_len="$len" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$crashes/" "$work/new" "$corpus" \
      >"$work/log-$seg.txt" 2>&1 || rc=$?
    echo "$seg $((SECONDS - start)) $rc" >>"$work/segments"
    left=$((left - (SECONDS - start)))
    [ "$rc" -eq 0 ] && break
    # The finding's first line names it; an input that repeats an earlier
    # finding of this run is dropped, so one bug keeps one input.
    log="$work/log-$seg.txt"
    sig=$( (grep -m1 "fuzz invariant broken" "$log" || grep -m1 "runtime error" "$log" ||
            grep -m1 "SUMMARY:" "$log" || echo "exit $rc") | sed "s/^==[0-9]*==//; s|$REPO/||g")
    unit=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
    echo "fuzz/run.sh: $t: $sig"
    if grep -qxF -- "$sig" "$work/signatures" 2>/dev/null; then
      [ -n "$unit" ] && rm -f -- "$unit"
    else
      echo "$sig" >>"$work/signatures"
    fi
  done

  # Minimized: the smallest inputs that keep every edge of the old corpus and the
  # new finds (edges, not hit counts: a fifth of the files), under the size cap.
  # Then they replace the kept corpus.
  "$bin" -merge=1 -use_counters=0 -max_len="$len" "$work/merged" "$corpus" "$work/new" \
    >"$work/merge.txt" 2>&1
  if [ -n "$(ls "$work/merged")" ]; then
    find "$corpus" -maxdepth 1 -type f -delete
    cp "$work/merged"/* "$corpus"/
  fi
  ls "$crashes" | sort | comm -13 <(sort "$work/crashes-before") - >"$work/crashes-new" || true
  python3 - "$t" "$work" "$corpus" >>"$results" <<'PY'
import glob, json, os, re, sys
t, work, corpus = sys.argv[1:]
segs = [l.split() for l in open(os.path.join(work, "segments"))]
execs = cov = ft = 0
for n, _, _ in segs:
    log = open(os.path.join(work, f"log-{n}.txt"), errors="replace").read()
    m = re.findall(r"stat::number_of_executed_units: (\d+)", log)
    execs += int(m[-1]) if m else 0
    for c, f in re.findall(r"cov: (\d+) ft: (\d+)", log):
        cov, ft = max(cov, int(c)), max(ft, int(f))
seconds = sum(int(s) for _, s, _ in segs)
files = [p for p in glob.glob(os.path.join(corpus, "*")) if os.path.isfile(p)]
new = [l.strip() for l in open(os.path.join(work, "crashes-new")) if l.strip()]
kept = os.path.join(os.path.dirname(os.path.dirname(corpus)), "crashes", t)
kept = len([p for p in glob.glob(os.path.join(kept, "*")) if os.path.isfile(p)])
sigs = os.path.join(work, "signatures")
findings = [l.strip() for l in open(sigs)] if os.path.exists(sigs) else []
print(json.dumps({"target": t, "seconds": seconds, "executions": execs,
                  "execs_per_s": round(execs / max(seconds, 1)), "runs": len(segs),
                  "corpus_files": len(files), "corpus_bytes": sum(map(os.path.getsize, files)),
                  "cov": cov, "ft": ft, "crashes": len(new), "crash_inputs": new,
                  "crash_inputs_kept": kept,
                  "findings": findings}))
PY
  tail -1 "$results"
done

day=$(date +%F)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
clang=$(clang++ --version | head -1)
python3 "$REPO/fuzz/report.py" "$REPO/bench/results/fuzz-$day" "$day" "$(nproc)" "$cpu" \
  "$clang" "fuzz/run.sh${args[*]:+ ${args[*]}}" "$results"
