#!/usr/bin/env bash
# Install the Debian packages tabletopic needs, only those missing. Usage:
#   scripts/install-system-deps.sh serve   # Java for Spark
#   scripts/install-system-deps.sh cluster # + PostgreSQL server (`tabletopic cluster up`)
#   scripts/install-system-deps.sh test    # + PostgreSQL server, kcat, JDBC drivers for Spark tests,
#                                          #   chromium for the console's browser tests (Playwright),
#                                          #   iproute2's ss to reset connections in fault tests
set -euo pipefail
mode=${1:-serve}

need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
if [ "$mode" = cluster ]; then
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
fi
if [ "$mode" = test ]; then
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  command -v kcat >/dev/null 2>&1 || need+=(kcat)
  [ -e /usr/share/java/sqlite-jdbc.jar ] || ls /usr/share/java/sqlite-jdbc*.jar >/dev/null 2>&1 || need+=(libxerial-sqlite-jdbc-java)
  [ -e /usr/share/java/postgresql.jar ] || need+=(libpostgresql-jdbc-java)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v ss >/dev/null 2>&1 || need+=(iproute2)
fi
[ ${#need[@]} -eq 0 ] && exit 0

echo "installing Debian packages: ${need[*]}"
sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "need root (or sudo) to install: ${need[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
