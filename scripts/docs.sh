#!/usr/bin/env bash
# Build the documentation site into site/ with every warning an error.
# Needs mkdocs-material and mkdocstrings[python] in .venv (the `docs` extra).
# The API reference is read from build/docs-src/, a symlinked wheel layout that
# scripts/docs_support.py (an mkdocs hook) makes so that service_webhooks.adapters resolves.
set -euo pipefail
cd "$(dirname "$0")/.."
export NO_MKDOCS_2_WARNING=1
python=${PYTHON:-.venv/bin/python}
"$python" -m mkdocs build --strict --clean --site-dir site "$@"
