#!/usr/bin/env python3
"""Every test of the suite takes one core of tests/run.sh's resource spec
(RESOURCE_GROUPS cores:1, CMakeLists.txt), except the tests named here, which
mostly wait and run beside the busy ones. A test added without it would run
as a third busy test on two cores (tests/run.sh says what that raced).

Usage: test_cores_check.py BUILD_DIR"""
import json
import subprocess
import sys

WAITING = {"e2e_continuation_ahead"}


def main():
    build = sys.argv[1]
    listed = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True,
                            capture_output=True, text=True).stdout
    tests = json.loads(listed)["tests"]
    wrong = []
    for t in tests:
        groups = [p["value"] for p in t.get("properties", []) if p["name"] == "RESOURCE_GROUPS"]
        takes_a_core = groups == [[{"requirements": [{".type": "cores", "slots": 1}]}]]
        if t["name"] in WAITING and groups:
            wrong.append(f"{t['name']}: waits, but takes {groups}")
        elif t["name"] not in WAITING and not takes_a_core:
            wrong.append(f"{t['name']}: takes {groups or 'no core'}, not RESOURCE_GROUPS cores:1")
    missing = WAITING - {t["name"] for t in tests}
    for name in sorted(missing):
        wrong.append(f"{name}: named as waiting, but no such test")
    if wrong:
        print("\n".join(wrong))
        return 1
    print(f"{len(tests)} tests: all but {len(WAITING)} take a core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
