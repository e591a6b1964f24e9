#!/usr/bin/env bash
# Unpacks the Debian packages staged by deploy/gpu/stage-prefix.sh
# (.third_party/debs) into a prefix of the checkout, on the GPU machine:
#
#   deploy/gpu/unpack-prefix.sh [PREFIX]     (default: .third_party/prefix)
#
# Never into /: the packages are Debian 12's, the machine's image is not.
# Development symlinks whose library the prefix does not hold (the GPU image
# has it: libsqlite3.so -> the image's libsqlite3.so.0) are pointed at the
# image's copy. Prints the lines to source for PATH and LD_LIBRARY_PATH into
# PREFIX/env.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DEBS=$REPO/.third_party/debs
PREFIX=${1:-$REPO/.third_party/prefix}
die() { echo "unpack-prefix.sh: error: $*" >&2; exit 1; }
compgen -G "$DEBS/*.deb" >/dev/null || die "no packages in $DEBS: run deploy/gpu/stage-prefix.sh on the development machine and carry .third_party"
command -v dpkg-deb >/dev/null || die "needs dpkg-deb"
rm -rf "$PREFIX"
mkdir -p "$PREFIX"
PREFIX=$(cd "$PREFIX" && pwd -P)
for d in "$DEBS"/*.deb; do dpkg-deb -x "$d" "$PREFIX"; done

# Debian's postinst scripts name slurmctld, slurmd and slurmstepd through the
# alternatives system (slurmctld -> slurmctld-wlm); dpkg -x runs no scripts.
for f in "$PREFIX"/usr/sbin/*-wlm; do
  [ -e "$f" ] && ln -sfn "$(basename "$f")" "${f%-wlm}"
done

arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
# Links: absolute ones into the prefix; dangling ones to the image's library.
while IFS= read -r link; do
  target=$(readlink "$link")
  case "$target" in
    /*) [ -e "$PREFIX$target" ] && ln -sfn "$PREFIX$target" "$link" && continue;;
  esac
  [ -e "$link" ] && continue
  name=$(basename "$target")
  stem=${name%%.so*}.so
  sys=$(ls "/usr/lib/$arch/$stem".* "/lib/$arch/$stem".* 2>/dev/null | head -1 || true)
  if [ -n "$sys" ]; then
    ln -sfn "$sys" "$link"
  else
    echo "unpack-prefix.sh: warning: $link -> $target: found neither in the prefix nor on this machine" >&2
  fi
done < <(find "$PREFIX" -type l)

libdirs=
for d in "$PREFIX/usr/lib/$arch" "$PREFIX/usr/lib/$arch/slurm-wlm" "$PREFIX/lib/$arch"; do
  [ -d "$d" ] && libdirs+="${libdirs:+:}$d"
done
cat >"$PREFIX/env" <<ENV
# Source this: the staged gRPC, Slurm and munge of $PREFIX.
export PATH=$PREFIX/usr/sbin:$PREFIX/usr/bin:\$PATH
export LD_LIBRARY_PATH=$libdirs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export CMAKE_PREFIX_PATH=$PREFIX/usr\${CMAKE_PREFIX_PATH:+;\$CMAKE_PREFIX_PATH}
# For the linker: gRPC's CMake config names some libraries bare (-lre2).
export LIBRARY_PATH=$PREFIX/usr/lib/$arch\${LIBRARY_PATH:+:\$LIBRARY_PATH}
ENV
echo "unpacked $(ls "$DEBS"/*.deb | wc -l) packages into $PREFIX ($(du -sh "$PREFIX" | cut -f1)); source $PREFIX/env"
