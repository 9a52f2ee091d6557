#!/usr/bin/env bash
# Set up (once) and run the whole test suite. Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
ensure_venv "local,eval,server,graph,postgres,dev,ollama,openai,encryption,redact"
ensure_browser
cd "$ROOT"
exec "$VENV/bin/python" -m pytest "$@"
