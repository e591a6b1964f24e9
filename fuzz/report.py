"""Writes bench/results/fuzz-<date>.{md,json} from fuzz/run.sh's per-target results.

usage: report.py OUT_PREFIX DATE CORES CPU COMPILER COMMAND RESULTS_JSONL
"""
import json
import sys
import textwrap


def para(text):
    return textwrap.fill(text, width=100) + "\n\n"


def main():
    out, day, cores, cpu, clang, command, results = sys.argv[1:]
    rows = [json.loads(line) for line in open(results)]
    doc = {"date": day, "machine": {"cores": int(cores), "cpu": cpu}, "compiler": clang,
           "command": command, "sanitizers": "address,undefined (fuzzer, no recover)",
           "one_core": True, "targets": rows}
    with open(out + ".json", "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    with open(out + ".md", "w") as f:
        f.write(f"# Fuzzing the parsers, {day}\n\n")
        f.write(para(f"Machine: {cores} cores, {cpu}; one target at a time, on one core. "
                     f"Command: `{command}`. {clang}, libFuzzer with ASan and UBSan."))
        f.write(para("Each target feeds libFuzzer's input to a parser and checks what must hold "
                     "for any input (fuzz/README.md). Coverage is libFuzzer's final `cov` "
                     "(edges) and `ft` (features); the corpus is the kept one after the "
                     "minimizing merge."))
        f.write("| target | seconds | executions | exec/s | corpus files | corpus bytes | cov "
                "| ft | crashes | crash inputs kept |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['target']} | {r['seconds']} | {r['executions']:,} | "
                    f"{r['execs_per_s']:,} | {r['corpus_files']} | {r['corpus_bytes']:,} | "
                    f"{r['cov']} | {r['ft']} | {r['crashes']} | {r['crash_inputs_kept']} |\n")
        f.write("\n" + para("`crashes`: found in this run; `crash inputs kept`: under "
                            "fuzz/crashes/<target>/ from every run (fuzz/crashes/README.md says "
                            "what each was), replayed by fuzz_replay_test."))
        crashes = [(r["target"], c) for r in rows for c in r["crash_inputs"]]
        if crashes:
            f.write("Crash inputs of this run (kept under fuzz/crashes/<target>/):\n\n")
            f.writelines(f"- {t}: `{c}`\n" for t, c in crashes)
            f.write("\n")
        findings = [(r["target"], s) for r in rows for s in r["findings"]]
        if findings:
            f.write("Findings of this run (the first line of each distinct one):\n\n")
            f.writelines(f"- {t}: `{s}`\n" for t, s in findings)
            f.write("\n")
    print(open(out + ".md").read())


if __name__ == "__main__":
    main()
