#!/usr/bin/env bash
# The fuzz long mode (100 000 examples per parser), timed per test; see bench/fuzz_long.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
exec "$PY" bench/fuzz_long.py "$@"
