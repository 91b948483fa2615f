#!/usr/bin/env bash
# Makes a cluster CA and one certificate per member, for actorflow's mutual TLS
# (--tls-cert/--tls-key/--tls-ca, or ACTORFLOW_TLS_CERT/KEY/CA):
#   deploy/tls/make-cluster-certs.sh DIR NAME...
#   -> DIR/ca.pem (give it to every member), DIR/ca.key (keep it away from the cluster),
#      DIR/NAME.pem and DIR/NAME.key for each NAME (one per task, master and client).
# An existing CA in DIR is reused, so members can be added later. Keys are P-256 and readable
# by their owner only. Needs the openssl command (Debian package openssl).
# Each certificate names its member in the subject alternative name too (DNS:NAME), where HTTPS
# clients such as Prometheus and curl look (actorflow's own connections check only the CA):
# scrape a task's metrics with server_name NAME. ACTORFLOW_CERT_SAN adds more to every
# certificate made, e.g. ACTORFLOW_CERT_SAN=IP:127.0.0.1,DNS:ps-0.example.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 DIR NAME..." >&2
  exit 2
fi
dir=$1
shift
command -v openssl >/dev/null || { echo "$0: the openssl command is missing (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
umask 077
days=${ACTORFLOW_CERT_DAYS:-825}
if [ ! -f "$dir/ca.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" -days "$days" \
    -subj "/CN=actorflow cluster CA" 2>/dev/null
fi
extensions=$(mktemp)
trap 'rm -f "$extensions" "$dir"/*.csr' EXIT
for name in "$@"; do
  case $name in
    */*|.*|'') echo "$0: '$name' is not a plain name" >&2; exit 2 ;;
    *[!A-Za-z0-9._-]*) echo "$0: '$name' is not a plain name (letters, digits, '.', '_', '-')" >&2; exit 2 ;;
  esac
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:%s%s\n' \
    "$name" "${ACTORFLOW_CERT_SAN:+,$ACTORFLOW_CERT_SAN}" >"$extensions"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$name" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -out "$dir/$name.pem" -days "$days" -extfile "$extensions" 2>/dev/null
done
chmod 644 "$dir/ca.pem" "$dir"/*.pem
echo "certificates for $* in $dir (CA: $dir/ca.pem)"
