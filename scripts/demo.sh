#!/usr/bin/env bash
# The main job: set up (once) and run the offline demo. Extra arguments go to `dspy-memory demo`.
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
ensure_venv "local"
exec "$VENV/bin/dspy-memory" demo "$@"
