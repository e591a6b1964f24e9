#!/usr/bin/env bash
# Makes a self-signed certificate and key for trellis-controller's TCP port,
# for a site that has no certificate authority of its own:
#
#   deploy/tls/make-self-signed.sh DIR [NAME...]
#
# writes DIR/controller.crt (give it to the controller as --tls-cert, and to
# CLI users as their --tls-ca / TRELLIS_TLS_CA) and DIR/controller.key (mode
# 0600, --tls-key). The certificate names this host (its short and full
# names), localhost and 127.0.0.1, plus each NAME given (host names or IP
# addresses): clients verify that the address they dial is one of them, so
# include the name the workers dial (the controller's --advertise host).
# Valid for 825 days; make a new pair and restart the controller before then.
set -euo pipefail

if [ $# -lt 1 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
dir=$1
shift
command -v openssl >/dev/null || { echo "make-self-signed: openssl is not installed" >&2; exit 1; }

names=("$(hostname -s 2>/dev/null || hostname)" "$(hostname -f 2>/dev/null || hostname)"
       localhost 127.0.0.1 "$@")
san=""
declare -A seen=()
for n in "${names[@]}"; do
  [ -n "$n" ] && [ -z "${seen[$n]:-}" ] || continue
  seen[$n]=1
  if [[ "$n" =~ ^[0-9.]+$ || "$n" == *:* ]]; then san+="${san:+,}IP:$n"; else san+="${san:+,}DNS:$n"; fi
done

mkdir -p "$dir"
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 825 \
  -subj "/CN=${names[0]}/O=trellis-controller" -addext "subjectAltName=$san" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -keyout "$dir/controller.key" -out "$dir/controller.crt" 2>/dev/null
chmod 600 "$dir/controller.key"
chmod 644 "$dir/controller.crt"  # public: users and workers need it
echo "certificate $dir/controller.crt (for $san)"
echo "key         $dir/controller.key"
