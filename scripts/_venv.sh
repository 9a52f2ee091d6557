# Sourced by demo.sh and test.sh: create or reuse .venv and install the package with the given
# extras. Re-installs only when pyproject.toml changes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DSPY_MEMORY_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

ensure_venv() {
    local extras="$1"
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
        echo "dspy-memory needs Python 3.10 or newer; set PYTHON=/path/to/python3.x" >&2
        exit 1
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        echo "creating $VENV" >&2
        "$PYTHON" -m venv "$VENV"
    fi
    local digest
    digest="$("$VENV/bin/python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()[:16])' "$ROOT/pyproject.toml")"
    local stamp="$VENV/.installed-${extras//,/-}-$digest"
    if [ -f "$stamp" ]; then
        return
    fi
    echo "installing dspy-memory[$extras] into $VENV (first run only)" >&2
    # torch first, pinned: on CPU-only machines any other resolution pulls gigabytes of CUDA.
    # TORCH_INDEX_URL (e.g. https://download.pytorch.org/whl/cpu) picks another wheel index.
    if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
        if [ -n "${TORCH_INDEX_URL:-}" ]; then
            "$VENV/bin/pip" install --quiet torch==2.13.0 --index-url "$TORCH_INDEX_URL"
        else
            "$VENV/bin/pip" install --quiet torch==2.13.0
        fi
    fi
    "$VENV/bin/pip" install --quiet -e "$ROOT[$extras]"
    rm -f "$VENV"/.installed-"${extras//,/-}"-*
    touch "$stamp"
}
