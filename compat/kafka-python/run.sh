#!/usr/bin/env bash
# kafka-python 3.0.12's own integration tests (from its PyPI sdist) against a tabletopic broker: an
# outside check of protocol behaviour written by people who did not write this broker.
#
#   compat/kafka-python/run.sh                 # starts a throwaway `tabletopic serve` on free ports
#   KAFKA_URI=kafka://127.0.0.1:9092 compat/kafka-python/run.sh   # against a running broker
#
# Results: $RESULTS_DIR/results.txt (pytest -rA summary; default ~/.cache/tabletopic/kafka-python) and the
# broker's log next to it; see FINDINGS.md for what fails and why.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
CACHE="${TABLETOPIC_CACHE:-$HOME/.cache/tabletopic}/kafka-python"
VERSION=3.0.12
SDIST="$CACHE/kafka_python-$VERSION"
RESULTS_DIR="${RESULTS_DIR:-$CACHE}"
mkdir -p "$RESULTS_DIR"

if [ ! -d "$SDIST/test/integration" ]; then
  mkdir -p "$CACHE"
  "$PY" -m pip download -q --no-binary :all: --no-deps "kafka-python==$VERSION" -d "$CACHE"
  tar xzf "$CACHE/kafka_python-$VERSION.tar.gz" -C "$CACHE"
fi

BROKER_PID=""
DATA=""
cleanup() {
  if [ -n "$BROKER_PID" ]; then kill "$BROKER_PID" 2>/dev/null || true; wait "$BROKER_PID" 2>/dev/null || true; fi
  if [ -n "$DATA" ]; then rm -rf "$DATA"; fi
}
trap cleanup EXIT

if [ -z "${KAFKA_URI:-}" ]; then
  free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
  PORT="$(free_port)"
  DATA="$(mktemp -d)"
  "$PY" -m tabletopic serve --data-dir "$DATA" \
    --override "listeners=PLAINTEXT://127.0.0.1:$PORT" \
    --override "admin.listener=" \
    --override "group.min.session.timeout.ms=1000" \
    --override "num.partitions=4" \
    --override "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer" \
    --override "allow.everyone.if.no.acl.found=true" \
    --override "schema.registry.listener=http://127.0.0.1:$(free_port)" \
    --override "catalog.listener=http://127.0.0.1:$(free_port)" \
    >"$RESULTS_DIR/broker.log" 2>&1 &
  BROKER_PID=$!
  for _ in $(seq 1 300); do
    if grep -qs "tabletopic is up" "$RESULTS_DIR/broker.log"; then break; fi
    if ! kill -0 "$BROKER_PID" 2>/dev/null; then cat "$RESULTS_DIR/broker.log"; exit 1; fi
    sleep 0.1
  done
  export KAFKA_URI="kafka://127.0.0.1:$PORT"
fi

cd "$SDIST"
# The suite imports `test.testutil`; without an __init__ the stdlib's `test` package wins.
touch "$SDIST/test/__init__.py"
# The sdist also lacks test/service.py (the JVM process wrapper); an external broker needs none.
cp "$HERE/service_standin.py" "$SDIST/test/service.py"
export PYTHONPATH="$SDIST${PYTHONPATH:+:$PYTHONPATH}"
# KAFKA_VERSION tells the suite which features to expect; ours match Kafka 4.0's API baseline.
export KAFKA_VERSION="${KAFKA_VERSION:-4.0.0}"
# The fixtures insist on a Kafka distribution directory even when they never start it.
mkdir -p "$SDIST/servers/$KAFKA_VERSION/kafka-bin"
set +e
"$PY" -m pytest test/integration -q -rA -p no:cacheprovider --timeout 120 -o addopts="" "$@" \
  | tee "$RESULTS_DIR/results.txt"
status=${PIPESTATUS[0]}
set -e
grep -E "^(PASSED|FAILED|ERROR|SKIPPED)" "$RESULTS_DIR/results.txt" | cut -d' ' -f1 | sort | uniq -c || true
exit "$status"
