"""The tests on encrypted files, in their own pytest process.

sqlite-vec lives in one SQLite library per process (store/sqlite/connection.py; loading it into
a second one crashed the process: tests/test_sqlite_library.py). This process uses sqlean, so
the store, purge, scope and retention suites on an encrypted file (backend "sqlcipher") and the encryption
and encrypted-backup tests run in a child pytest whose library is sqlcipher3. Run them alone with
`DSPY_MEMORY_SQLITE_DRIVER=sqlcipher3 python -m pytest tests/test_encryption.py ...`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sqlcipher3", reason="the encryption extra is not installed")

ROOT = Path(__file__).resolve().parent.parent
MODULES = (
    "tests/test_encryption.py",
    "tests/test_backup_encrypted.py",
    "tests/test_bench_governance.py",
    "tests/test_readme_encrypted.py",
    "tests/test_store.py",
    "tests/test_purge.py",
    "tests/test_scopes.py",
    "tests/test_retention.py",
)


def test_the_encrypted_file_suites_pass_in_a_sqlcipher3_process(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSPY_MEMORY_")}
    env["DSPY_MEMORY_SQLITE_DRIVER"] = "sqlcipher3"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--basetemp",
            str(tmp_path),
            *MODULES,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    counts = {
        word: int(number) for number, word in re.findall(r"(\d+) (passed|skipped|failed|error)", summary)
    }
    # Every test there ran on an encrypted file or about encryption (49 when this was written);
    # none was skipped, so a missing driver or a broken selection cannot pass for a green run.
    assert counts.get("passed", 0) >= 45 and not counts.get("skipped"), summary
    print(summary)
