#!/usr/bin/env bash
# Records what a GPU machine's image provides, for deploy/gpu/stage-prefix.sh:
# the shared libraries the dynamic loader finds (sonames), the installed
# Debian/Ubuntu packages, and the facts the end-to-end run depends on (user,
# kernel, NUMA nodes, GPUs, cgroups). Run it on the GPU machine:
#
#   deploy/gpu/image-inventory.sh OUT_DIR
#
# OUT_DIR/sonames.txt is what stage-prefix.sh reads (as deploy/gpu/image-sonames.txt).
set -uo pipefail
OUT=${1:?usage: image-inventory.sh OUT_DIR}
mkdir -p "$OUT"
ldconfig -p | awk 'NR > 1 && $NF ~ /^\// { print $1 }' | sort -u >"$OUT/sonames.txt"
dpkg-query -W -f='${Package}\t${Version}\n' 2>/dev/null | sort >"$OUT/packages.txt"
{
  echo "# date: $(date -u +%FT%TZ)"
  echo "# id: $(id)"
  echo "# uname: $(uname -a)"
  echo "# os: $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "# glibc: $(ldd --version | head -1)"
  echo "# nproc: $(nproc)"
  echo "# cmake: $(cmake --version | head -1)  gcc: $(gcc -dumpfullversion)"
  echo "# protoc: $(protoc --version 2>&1)"
  for d in /sys/devices/system/node/node*; do
    echo "# $(basename "$d"): cpus=$(cat "$d/cpulist") $(grep -E 'MemTotal|MemFree' "$d/meminfo" | awk '{printf "%s=%s kB ", $3, $4}')"
  done
  echo "# /sys/devices/system/node: online=$(cat /sys/devices/system/node/online) has_cpu=$(cat /sys/devices/system/node/has_cpu 2>/dev/null)"
  echo "# cgroup mounts: $(grep cgroup /proc/mounts | tr '\n' ';')"
  echo "# /dev/nvidia*: $(ls /dev/nvidia* 2>/dev/null | tr '\n' ' ')"
  nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total --format=csv,noheader 2>&1 | sed 's/^/# gpu: /'
  nvidia-smi topo -m 2>&1 | sed 's/^/# topo: /'
  for h in grpc absl sqlite3.h slurm munge.h CLI nlohmann toml++ spdlog fmt google/protobuf boost gtest; do
    if [ -e "/usr/include/$h" ]; then echo "# include $h: yes"; else echo "# include $h: no"; fi
  done
  ls /usr/lib/x86_64-linux-gnu/cmake 2>/dev/null | tr '\n' ' ' | sed 's/^/# cmake configs: /'; echo
  for b in protoc grpc_cpp_plugin munged slurmctld sqlite3 python3 ninja ccache; do
    echo "# bin $b: $(command -v "$b" || echo no)"
  done
} >"$OUT/facts.txt"
cat "$OUT/facts.txt"
echo "sonames: $(wc -l <"$OUT/sonames.txt"), packages: $(wc -l <"$OUT/packages.txt")"
