#!/usr/bin/env bash
# Installs every Debian package Trellis needs to build, test and run the local
# Slurm cluster. Idempotent and non-interactive; needs root (or sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git python3
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  prometheus-cpp-dev libsqlite3-dev sqlite3 libboost-dev libgtest-dev libgmock-dev
  libtorch-dev libgloo-dev
  slurm-wlm munge
  prometheus
  libnuma-dev numactl libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libspdlog-dev
  libbenchmark-dev
  procps psmisc sqlite3 rsync
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
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
echo "setup: done"
