#!/usr/bin/env bash
# Installs every Debian package Trellis needs to build, test and run the local
# Slurm cluster. Idempotent and non-interactive; needs root (or sudo).
#   deploy/setup.sh                the packages
#   deploy/setup.sh --system-blas  and points the system's libblas.so.3 at the
#                                  OpenMP OpenBLAS for every program (Trellis's
#                                  own programs use it without this: they carry
#                                  its directory in their RPATH, CMakeLists.txt)
# Building without root, against a site's or your own libraries: docs/install.md.
set -euo pipefail
system_blas=0
case "${1:-}" in
  "") ;;
  --system-blas) system_blas=1 ;;
  *) echo "usage: deploy/setup.sh [--system-blas]" >&2; exit 2 ;;
esac

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git python3
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  prometheus-cpp-dev libsqlite3-dev sqlite3 libboost-dev libgtest-dev libgmock-dev
  libtorch-dev libgloo-dev libopenblas0-openmp
  slurm-wlm munge
  slurmdbd mariadb-server   # local-cluster up --accounting: its own slurmdbd and MariaDB
  prometheus curl nodejs
  libnuma-dev numactl libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libspdlog-dev
  libbenchmark-dev
  procps psmisc sqlite3 rsync
  openssl   # deploy/tls/make-self-signed.sh and the TLS tests
  bindfs    # a FUSE mount, taken for a network filesystem (tests/e2e/controller_keeper.sh)
  chromium   # headless: tests/report/report_e2e.sh renders `trellis report`'s page
)

# node and npm run the dashboards' schema check (dashboards/check_schema.sh).
# Debian's npm is a package of its own; a NodeSource nodejs carries npm inside.
command -v npm >/dev/null || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep >/dev/null "install ok installed"; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # The slurm/munge/prometheus packages may start system services; Trellis runs
  # its own instances under a state directory, so stop the system ones.
  for svc in slurmctld slurmd munge prometheus; do
    if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
      $SUDO systemctl stop "$svc" || true
    fi
  done
fi

# slurmdbd and mariadb-server enable and start system services of their own
# (the system's MariaDB on 3306 and /run/mysqld); `local-cluster up
# --accounting` runs its own under the cluster's directory, so stop and
# disable the system ones, also where an earlier run installed them.
for svc in slurmdbd mariadb; do
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    if systemctl is-active --quiet "$svc" 2>/dev/null; then $SUDO systemctl stop "$svc" || true; fi
    if systemctl is-enabled --quiet "$svc" 2>/dev/null; then $SUDO systemctl disable --quiet "$svc" || true; fi
  elif [ -x "/etc/init.d/$svc" ] && "/etc/init.d/$svc" status >/dev/null 2>&1; then
    # No systemd (a container): the package's init script may have started it.
    $SUDO "/etc/init.d/$svc" stop >/dev/null 2>&1 || true
  fi
done

if [ "$system_blas" = 0 ]; then
  echo "setup: done (the system's BLAS left as it is; --system-blas changes it)"
  exit 0
fi

# LibTorch (Debian's) does its fp32 matmuls through whatever libblas.so.3 the
# alternatives system points to. The reference BLAS makes an fp32 CPU training
# step 3-9x slower than OpenBLAS (bench/results/trainer-cpu-2026-11-30.md). The
# OpenMP build, not the pthread one: it runs on LibTorch's own OpenMP threads,
# sized by OMP_NUM_THREADS, where the pthread build keeps a second pool
# (OPENBLAS_NUM_THREADS) that spins against OpenMP's (fp32 steps 2.4x slower
# with 2 threads each on 2 cores). libblas.so.3 and liblapack.so.3 are thin
# wrappers that load libopenblas.so.0 through its own alternative: all three
# must name the same build.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
for lib in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
  name="$lib-$arch"
  want="/usr/lib/$arch/openblas-openmp/$lib"
  query=$(update-alternatives --query "$name" 2>/dev/null || true)
  now=$(sed -n 's/^Value: //p' <<<"$query")
  if [ "$now" = "$want" ]; then
    echo "setup: $lib -> $want"
    continue
  fi
  # Auto mode where this is the best candidate; pinned otherwise (the pthread
  # build, if installed too, has a higher priority).
  if [ "$(sed -n 's/^Best: //p' <<<"$query")" = "$want" ]; then
    $SUDO update-alternatives --quiet --auto "$name"
  else
    $SUDO update-alternatives --quiet --set "$name" "$want"
  fi
  echo "setup: $lib -> $want (was ${now:-unset})"
done
echo "setup: done"
