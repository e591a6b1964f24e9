#!/usr/bin/env bash
# Copies the header-only libraries trainer_core needs (toml++, nlohmann-json,
# CLI11) from this machine's Debian packages into .third_party/include of the
# checkout (git-ignored), for a GPU machine that has LibTorch, CUDA and
# GoogleTest but not these headers and no network to fetch them. Carry
# .third_party with the working tree; the scripts of bench/gpu/ find it there.
#
#   deploy/gpu/stage-headers.sh [DEST]     (default: .third_party/include)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DEST=${1:-$REPO/.third_party/include}
die() { echo "stage-headers.sh: $*" >&2; exit 1; }

# package -> header directory it installs under /usr/include
declare -A DIRS=([libtomlplusplus-dev]=toml++ [nlohmann-json3-dev]=nlohmann [libcli11-dev]=CLI)
missing=()
for pkg in "${!DIRS[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "stage-headers.sh: installing ${missing[*]} (deploy/setup.sh installs them too)"
  bash "$REPO/deploy/setup.sh"
fi
mkdir -p "$DEST"
for pkg in "${!DIRS[@]}"; do
  dir=${DIRS[$pkg]}
  [ -d "/usr/include/$dir" ] || die "/usr/include/$dir missing although $pkg is installed"
  rm -rf "${DEST:?}/$dir"
  cp -r "/usr/include/$dir" "$DEST/$dir"
  printf '%-22s %-10s %s\n' "$pkg" "$(dpkg-query -W -f='${Version}' "$pkg")" "$DEST/$dir"
done
echo "staged $(du -sh "$DEST" | cut -f1) of headers in $DEST; carry .third_party with the checkout"
