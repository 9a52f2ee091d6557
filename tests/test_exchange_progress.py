"""Export and import at scale (issue 32): both tell an `on_progress` callback how far they are
(records, done rising to the total), the command line draws it as a bar on stderr while stdout
keeps only the result, and import streams the file in two passes: its memory does not grow with
the file, and a failure in the second pass, after batches were written, still leaves nothing."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.governance import exchange, exchange_import
from dspy_memory.governance.exchange_format import ExportFileError
from dspy_memory.util.progress import Progress

from .test_progress import rising_to_the_total

pytestmark = pytest.mark.backends


def opened(path: str) -> Memory:
    return Memory(path, embedder=HashEmbedder(64), track_access=False)


def filled(path: str) -> None:
    """Memories, with their episodes, events and turn contexts, of two users."""
    with opened(path) as memory:
        for user in ("ada", "bob"):
            for i in range(4):
                memory.add([f"{user} note {i}.", f"{user} says more {i}."], user_id=user, infer=False)
        memory.update(memory.get_all(user_id="ada")[0].id, "Ada lives in Denver.", user_id="ada")


def test_export_and_import_report_records_rising_to_the_total(db_path, tmp_path, monkeypatch):
    filled(db_path)
    monkeypatch.setattr(exchange, "PROGRESS_EVERY", 5)
    monkeypatch.setattr(exchange_import, "BATCH", 4)
    seen: list[Progress] = []
    with opened(db_path) as memory:
        exported = memory.export(
            tmp_path / "all.jsonl.gz", all_scopes=True, include_embeddings=True, on_progress=seen.append
        )
    assert rising_to_the_total(seen, "records") == sum(exported.counts.values()) > 20
    assert len({progress.done for progress in seen}) > 3  # a step per 5 records
    seen.clear()
    copy = str(tmp_path / "copy.db")
    with opened(copy) as memory:
        report = memory.import_(tmp_path / "all.jsonl.gz", on_progress=seen.append)
    assert rising_to_the_total(seen, "records") == sum(exported.counts.values())
    assert seen[0] == Progress(0, None, "records")  # shown while the file is checked
    writing = [progress for progress in seen if progress.total is not None]
    assert len(writing) > 5  # a step per batch of 4
    assert seen[-1].counts == {"new": sum(report.new.values()), "present": 0}
    seen.clear()
    with opened(copy) as memory:
        again = memory.import_(tmp_path / "all.jsonl.gz", on_progress=seen.append)
    assert not again.changed and seen[-1].counts == {"new": 0, "present": sum(report.new.values())}


def test_the_first_pass_reports_records_checked(db_path, tmp_path, monkeypatch):
    filled(db_path)
    monkeypatch.setattr(exchange_import, "BATCH", 3)  # also how often the first pass reports
    with opened(db_path) as memory:
        memory.export(tmp_path / "ada.jsonl", user_id="ada")
    seen: list[Progress] = []
    with opened(str(tmp_path / "copy.db")) as memory:
        memory.import_(tmp_path / "ada.jsonl", on_progress=seen.append)
    checked = [progress.counts["checked"] for progress in seen if "checked" in progress.counts]
    assert checked and checked == sorted(checked) and checked[0] == 3
    assert all(
        progress.done == 0 and progress.total is None for progress in seen if "checked" in progress.counts
    )


def rewritten(path: Path, target: Path, change) -> None:
    """A copy of an export with its record lines changed by `change(list of lines)`, and a
    trailer that matches them (so only the content checks, not the checksum, refuse it)."""
    lines = path.read_bytes().splitlines(keepends=True)
    body = lines[1:-1]
    change(body)
    trailer = json.loads(lines[-1])
    trailer["sha256"] = hashlib.sha256(b"".join(body)).hexdigest()
    target.write_bytes(lines[0] + b"".join(body) + json.dumps(trailer).encode() + b"\n")


def table_counts(path: str) -> dict:
    with opened(path) as memory:
        return memory.stats()["tables"]


def test_a_broken_line_in_the_middle_stores_nothing(db_path, other_store, tmp_path):
    filled(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "all.jsonl", all_scopes=True)
    rewritten(
        tmp_path / "all.jsonl",
        tmp_path / "broken.jsonl",
        lambda body: body.__setitem__(len(body) // 2, b'{"record": "memory", "id": \n'),
    )
    copy = other_store()
    with opened(copy) as memory, pytest.raises(ExportFileError, match="not valid JSON"):
        memory.import_(tmp_path / "broken.jsonl")
    assert set(table_counts(copy).values()) == {0}


def test_a_file_changed_between_the_passes_stores_nothing(db_path, other_store, tmp_path, monkeypatch):
    """The second pass writes batch by batch; the line it breaks on comes after some were
    written, and the one transaction takes them all back."""
    filled(db_path)
    with opened(db_path) as memory:
        memory.export(tmp_path / "all.jsonl", all_scopes=True)
    original = (tmp_path / "all.jsonl").read_bytes()
    lines = original.splitlines(keepends=True)
    last_event = max(i for i, line in enumerate(lines) if b'"record":"memory_event"' in line)
    monkeypatch.setattr(exchange_import, "BATCH", 2)
    embed_ahead = exchange_import._embed_ahead

    def then_changed(path, *args):
        found = embed_ahead(path, *args)
        Path(path).write_bytes(
            b"".join(lines[:last_event]) + b"not json\n" + b"".join(lines[last_event + 1 :])
        )
        return found

    monkeypatch.setattr(exchange_import, "_embed_ahead", then_changed)
    copy = other_store()
    with opened(copy) as memory, pytest.raises(ExportFileError, match="changed while it was imported"):
        memory.import_(tmp_path / "all.jsonl")
    assert set(table_counts(copy).values()) == {0}
    (tmp_path / "all.jsonl").write_bytes(original)
    monkeypatch.setattr(exchange_import, "_embed_ahead", embed_ahead)
    with opened(copy) as memory:
        assert memory.import_(tmp_path / "all.jsonl").new["memory"] > 0


# -- memory stays flat -------------------------------------------------------------------------


def synthetic_export(path: Path, template: Path, n: int) -> int:
    """An export of `n` raw memories of 20,000 characters each, with their vectors (so that no
    time goes to embedding), made from the memory record of `template`; its size in bytes."""
    lines = template.read_text().splitlines()
    header = {key: value for key, value in json.loads(lines[0]).items() if key not in ("record", "counts")}
    [memory] = [json.loads(line) for line in lines[1:-1] if '"record":"memory"' in line]
    vector = base64.b64encode(np.ones(64, dtype="<f4").tobytes()).decode()

    def records():
        for i in range(n):
            yield {**memory, "id": f"m-{i:06d}", "content": f"Ada's note {i}: " + "tea and maps " * 1540}
        for i in range(n):
            yield {"record": "vector", "memory_id": f"m-{i:06d}", "version": 1, "dim": 64, "vector": vector}

    header["embeddings"] = True
    return exchange.write(path, header, records(), {"memory": n, "vector": n}).bytes


# In its own process: how far the peak RSS rose above the resident size before it while one file
# was imported, after a warm-up import (every module loaded); Linux resets the peak ("5" into
# clear_refs). SQLite's page cache is a fixed budget per connection (32 MiB), not growth with
# the file: shrunk here so that files this small show what does grow.
MEASURE = """
import json, sys
from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.governance import exchange_import
exchange_import.BATCH = 50

def kib(field):
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith(field)).split()[1])

warm, target, folder = sys.argv[1:4]
for name, file in (("warm", warm), ("target", target)):
    with Memory(f"{folder}/{name}.db", embedder=HashEmbedder(64), track_access=False) as memory:
        with memory.store.transaction() as conn:
            conn.execute("PRAGMA cache_size = -2048")
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        before = kib("VmRSS:")
        report = memory.import_(file)
        grew = (kib("VmHWM:") - before) * 1024
print(json.dumps({"grew": grew, "memories": report.new["memory"], "reembedded": report.reembedded}))
"""


@pytest.mark.sqlite_only
@pytest.mark.skipif(
    not os.access("/proc/self/clear_refs", os.W_OK),
    reason="needs Linux's /proc/self/clear_refs to reset the peak",
)
def test_import_memory_does_not_grow_with_the_file(db_path, tmp_path):
    with opened(db_path) as memory:
        memory.add("Ada likes tea.", user_id="ada", infer=False)
        memory.export(tmp_path / "template.jsonl", user_id="ada")
    sizes = {
        n: synthetic_export(tmp_path / f"n{n}.jsonl", tmp_path / "template.jsonl", n) for n in (5, 250, 2500)
    }
    grew = {}
    for n in (250, 2500):
        folder = tmp_path / f"run{n}"
        folder.mkdir()
        done = subprocess.run(
            [sys.executable, "-c", MEASURE, str(tmp_path / "n5.jsonl"), str(tmp_path / f"n{n}.jsonl"), str(folder)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["memories"] == n and result["reembedded"] == 0
        grew[n] = result["grew"]
    # Ten times the records (48 MB of file): not ten times the memory; held whole, the file's
    # records alone would take more than twice its size.
    print(f"file bytes {sizes}, peak RSS growth {grew}")
    assert sizes[2500] > 45e6
    assert grew[2500] < 2 * grew[250] + 8e6 and grew[2500] < sizes[2500] / 4, (sizes, grew)


# -- the command line --------------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "DSPY_MEMORY_LM"}
    return subprocess.run(
        [sys.executable, "-m", "dspy_memory.cli", *args],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("quiet", [False, True], ids=["bar", "quiet"])
def test_cli_export_and_import_draw_the_bar_on_stderr(tmp_path, quiet):
    db, out = str(tmp_path / "m.db"), str(tmp_path / "ada.jsonl.gz")
    filled(db)
    flags = ["--json", *(["--quiet"] if quiet else [])]
    exported = cli("export", "--db", db, "--embedder", "test:64", "--user", "ada", "-o", out, *flags)
    assert exported.returncode == 0, exported.stderr
    counts = json.loads(exported.stdout)["counts"]  # the whole of stdout is JSON
    total = sum(counts.values())
    imported = cli("import", "--db", str(tmp_path / "copy.db"), "--embedder", "test:64", out, *flags)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["new"]["memory"] == counts["memory"] > 0
    for name, done in (("export", exported), ("import", imported)):
        if quiet:
            assert done.stderr == "", done.stderr
        else:
            assert f"{name}: 100%" in done.stderr and f"{total}/{total}" in done.stderr, done.stderr
            assert " records" in done.stderr
    if not quiet:
        assert "new=" in imported.stderr and "present=0" in imported.stderr


def test_cli_plain_output_says_what_was_left_out_as_expired(tmp_path):
    db, out, copy = str(tmp_path / "m.db"), str(tmp_path / "ada.jsonl"), str(tmp_path / "copy.db")
    started = time.monotonic()
    with opened(db) as memory:
        # Long enough for a command to start on a busy machine before it passes.
        memory.add("Ada's locker code is 4711.", user_id="ada", infer=False, expires_in="6s")
        memory.add("Ada likes tea.", user_id="ada", infer=False)
    before = cli("export", "--db", db, "--embedder", "test:64", "--user", "ada", "-o", out, "--quiet")
    assert before.returncode == 0 and "expired" not in before.stdout, before.stderr
    time.sleep(max(0.0, started + 6.2 - time.monotonic()))
    imported = cli("import", "--db", copy, "--embedder", "test:64", out, "--quiet")
    assert imported.returncode == 0, imported.stderr
    assert "left out as expired: 1 episode, 1 memory" in imported.stdout and imported.stderr == ""
    after = cli("export", "--db", db, "--embedder", "test:64", "--user", "ada", "-o", out, "--quiet")
    assert "left out as expired: 1 episode, 1 memory" in after.stdout and after.stderr == ""
