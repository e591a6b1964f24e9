#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/README.md) with Debian's clang, ASan and
# UBSan, in a build directory of their own (build-fuzz/, beside the main build).
# Installs what it needs from Debian (idempotent; needs root or sudo then).
#
#   fuzz/build.sh                # TRELLIS_FUZZ_BUILD_DIR to change the directory
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${TRELLIS_FUZZ_BUILD_DIR:-$REPO/build-fuzz}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
apt_install() {
  echo "fuzz/build.sh: installing $*"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "$@"
}

# The parsers' own dependencies (header-only ones and absl) as the main build has them.
PACKAGES=(clang cmake ninja-build libabsl-dev nlohmann-json3-dev libtomlplusplus-dev)
missing=()
for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then apt_install "${missing[@]}"; fi

# libFuzzer and the sanitizer runtimes are in libclang-rt-N-dev, only recommended
# by clang (so not installed with --no-install-recommends).
major=$(clang++ -dumpversion | cut -d. -f1)
if ! installed "libclang-rt-$major-dev"; then apt_install "libclang-rt-$major-dev"; fi

cmake -S "$REPO/fuzz" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_CXX_COMPILER=clang++ >/dev/null
ninja -C "$BUILD"
echo "fuzz/build.sh: targets in $BUILD: $(cd "$BUILD" && ls fuzz_* | tr '\n' ' ')"
