#!/usr/bin/env bash
# Prepares, on a Debian 12 development machine, everything a GPU machine needs
# to build and run the whole of Trellis (controller, worker, CLI, trainer) and
# a local Slurm cluster, when its image has LibTorch, CUDA and protobuf but no
# gRPC, abseil, SQLite headers, Slurm or munge, and no network:
#
#   - the Debian packages of gRPC, abseil, c-ares, re2, SQLite's headers,
#     toml++, Slurm and munge, fetched with `apt-get download` into
#     .third_party/debs/ (git-ignored), plus every library they need that the
#     GPU image lacks: the closure is computed over the packages' ELF files
#     (their DT_NEEDED sonames) against deploy/gpu/image-sonames.txt, the
#     sonames that image provides (recorded by deploy/gpu/image-inventory.sh);
#   - the header-only libraries of deploy/gpu/stage-headers.sh in
#     .third_party/include/.
#
# Carry .third_party with the working tree; on the GPU machine,
# deploy/gpu/unpack-prefix.sh unpacks the packages into .third_party/prefix
# (never into /) and bench/gpu/e2e.sh builds and runs everything.
#
#   deploy/gpu/stage-prefix.sh            # needs network (apt), not root
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DEBS=$REPO/.third_party/debs
IMAGE_SONAMES=$REPO/deploy/gpu/image-sonames.txt
# What travels is limited (the working tree and carried paths together).
MAX_MIB=${STAGE_MAX_MIB:-48}
die() { echo "stage-prefix.sh: error: $*" >&2; exit 1; }
log() { echo "stage-prefix.sh: $*"; }

# The packages Trellis builds and runs against, by their Debian 12 names.
# Runtime-only dependencies are found by the soname closure below.
ROOTS=(
  libgrpc++-dev libgrpc-dev libgrpc++1.51 libgrpc29 protobuf-compiler-grpc
  libabsl-dev libabsl20220623 libc-ares-dev libc-ares2 libre2-dev libre2-9
  libsqlite3-dev libtomlplusplus-dev libtomlplusplus3
  prometheus-cpp-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libcivetweb1
  libcivetweb-dev
  # Their CMake packages import every target, so the files behind them must
  # exist: civetweb's server binary and prometheus-cpp's push library.
  civetweb libprometheus-cpp-push1.0
  # prometheus-cpp's CMake package looks for CURL and ZLIB (push, compression)
  # even where only core and pull are linked: their headers must be there.
  libcurl4-openssl-dev zlib1g-dev
  slurmctld slurmd slurm-client slurm-wlm-basic-plugins
  munge libmunge2
)

command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || die "needs apt-get and dpkg-deb (Debian)"
command -v readelf >/dev/null || die "needs readelf (binutils; deploy/setup.sh installs build-essential)"
[ -s "$IMAGE_SONAMES" ] || die "missing $IMAGE_SONAMES (record it on the GPU machine with deploy/gpu/image-inventory.sh)"

bash "$REPO/deploy/gpu/stage-headers.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$DEBS"

# download PKG...: fetch into $DEBS what is not there yet (one version each).
download() {
  local p todo=()
  for p in "$@"; do
    compgen -G "$DEBS/${p}_*.deb" >/dev/null || todo+=("$p")
  done
  [ ${#todo[@]} -eq 0 ] && return 0
  log "downloading ${todo[*]}"
  (cd "$DEBS" && apt-get download -q "${todo[@]}" >/dev/null) ||
    die "apt-get download ${todo[*]} failed (network? 'apt-get update' as root first)"
}

# The package (installed on this machine) that ships the file named SONAME.
package_of_soname() {
  local so=$1 hit
  hit=$(dpkg -S "*/$so" 2>/dev/null | awk -F': ' '{print $1}' | tr ', ' '\n\n' | grep -v '^$' |
        grep -v -- '-dev$' | head -1) || true
  [ -n "$hit" ] && echo "${hit%%:*}"
}

packages=("${ROOTS[@]}")
for round in 1 2 3 4 5 6; do
  download "${packages[@]}"
  rm -rf "$work/root"; mkdir -p "$work/root"
  # Only the packages wanted so far: those of an earlier staging must not
  # hide a missing soname (they would then be dropped below as stale).
  for p in "${packages[@]}"; do
    for d in "$DEBS/${p}_"*.deb; do dpkg-deb -x "$d" "$work/root"; done
  done
  # Sonames the staged packages provide, and the ones their ELF files need.
  find "$work/root" \( -type f -o -type l \) -name '*.so*' -printf '%f\n' | sort -u >"$work/provided"
  : >"$work/needed"
  while IFS= read -r f; do
    readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' >>"$work/needed"
  done < <(find "$work/root" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c \
             'head -c4 "$1" | grep -q "ELF" && echo "$1"' _ {} \;)
  sort -u "$work/needed" -o "$work/needed"
  missing=$(comm -23 "$work/needed" <(sort -u "$IMAGE_SONAMES" "$work/provided"))
  [ -z "$missing" ] && break
  added=()
  for so in $missing; do
    pkg=$(package_of_soname "$so") ||
      true
    [ -n "$pkg" ] || die "no installed package of this machine ships $so (needed by a staged package); install it (deploy/setup.sh) and run again"
    printf '%s\n' "${packages[@]}" | grep -qxF "$pkg" && die "$pkg is staged but $so is still missing"
    added+=("$pkg")
  done
  mapfile -t added < <(printf '%s\n' "${added[@]}" | sort -u)
  log "round $round: the GPU image lacks $(echo $missing | tr '\n' ' '): adding ${added[*]}"
  packages+=("${added[@]}")
done
[ -z "$missing" ] || die "the library closure did not settle: $missing"

# Drop packages of earlier stagings that are no longer wanted, and write the manifest.
for d in "$DEBS"/*.deb; do
  name=$(dpkg-deb -f "$d" Package)
  printf '%s\n' "${packages[@]}" | grep -qxF "$name" || { log "removing stale $(basename "$d")"; rm -f "$d"; }
done
{
  echo "# Debian packages staged by deploy/gpu/stage-prefix.sh on $(date -u +%F) ($(. /etc/os-release && echo "$PRETTY_NAME"))"
  for d in "$DEBS"/*.deb; do
    printf '%s\t%s\t%s\n' "$(dpkg-deb -f "$d" Package)" "$(dpkg-deb -f "$d" Version)" "$(stat -c %s "$d")"
  done
} >"$DEBS/MANIFEST"
total_kib=$(du -sk "$REPO/.third_party" | cut -f1)
log "staged $(ls "$DEBS"/*.deb | wc -l) packages; .third_party is $((total_kib / 1024)) MiB"
[ "$total_kib" -le $((MAX_MIB * 1024)) ] || die ".third_party is $((total_kib / 1024)) MiB, over the ${MAX_MIB} MiB that may travel"
log "carry .third_party; on the GPU machine: bench/gpu/e2e.sh"
