"""`python -m evals.chaos` in miniature: a few seconds of writers, a searcher and kills, then the
invariants (all zero); and the checker itself on a file that breaks them."""

from __future__ import annotations

import json
import time

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.testing import scripted_lm
from evals.chaos import main
from evals.chaos_check import read_logs, verify

KEYS = {
    "acknowledged_adds",
    "acknowledged_messages",
    "lost",
    "duplicated",
    "stuck",
    "scope_violations",
    "search_sample_misses",
    "errors",
    "kills",
    "add_ms",
    "search_ms",
    "integrity",
    "ok",
}


def test_chaos_runs_and_every_invariant_holds(tmp_path, capsys):
    results = main(
        [
            "--seconds", "6",
            "--writers", "2",
            "--searchers", "1",
            "--kill-every", "2.5",
            "--workdir", str(tmp_path / "work"),
            "--out", str(tmp_path / "chaos.json"),
            "--plot", str(tmp_path / "chaos.png"),
        ]
    )  # fmt: skip
    saved = json.loads((tmp_path / "chaos.json").read_text())
    assert KEYS <= set(saved)
    assert (tmp_path / "chaos.png").stat().st_size > 0
    assert "writes acknowledged" in capsys.readouterr().out
    assert saved["acknowledged_adds"] > 0
    assert sum(saved["kills"].values()) > 0
    # The invariants: what must be 0 after kill -9, races and LM failures.
    problems = {key: saved[key] for key in ("lost", "duplicated", "stuck", "scope_violations")}
    assert problems == dict.fromkeys(problems, 0), (saved["lost_reasons"], saved["duplicates"])
    assert saved["search_sample_misses"] == 0
    assert saved["integrity"] == "ok"
    assert results["ok"] is True


def careless_lm():
    """Adds a home for every move without looking at the current one."""

    def responder(call):
        ops = []
        for turn in call.inputs["turns"]:
            city = turn["text"].split()[-1].rstrip(".")
            ops.append(
                {
                    "action": "ADD",
                    "content": f"{turn['speaker']} lives in {city}.",
                    "subject": turn["speaker"],
                    "predicate": "lives_in",
                    "object": city,
                }
            )
        return {"ops": ops}

    return scripted_lm(responder)


def test_the_checker_counts_a_lost_write_and_two_current_homes(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    acks = []
    with Memory(str(work / "memory.db"), embedder=HashEmbedder(64), lm=careless_lm()) as memory:
        for city in ("Lisbon1a", "Porto2b"):
            result = memory.add(
                {"role": "user", "name": "U0", "content": f"I moved to {city}."}, user_id="u0"
            )
            [episode] = result.episodes
            acks.append({"episode": episode.id, "token": city, "kind": "move"})
    acks.append({"episode": "no-such-episode", "token": "K0000000000", "kind": "locker"})  # never stored
    lines = [{"type": "ack", "user": "u0", "ms": 1.0, "error": None, "messages": [m]} for m in acks]
    # An LM call about a move that was not shown the home that existed by then.
    lines.append({"type": "move_call", "t": time.time() + 1, "user": "u0", "shown_home": False})
    lines.append({"type": "move_call", "t": 0, "user": "u0", "shown_home": False})  # before any home
    (work / "writer0.1.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines) + '{"type": "ack", "us'
    )
    logs = read_logs(work)
    assert logs["torn_lines"] == 1
    with Memory(str(work / "memory.db"), embedder=HashEmbedder(64)) as memory:
        found = verify(memory, logs, seed=0, sample=10)
    assert found["acknowledged_messages"] == 3
    assert found["lost"] == 1
    assert found["lost_reasons"]["episode missing"] == 1
    assert found["duplicates"]["extra current lives_in facts"] == 1
    assert found["duplicated"] == 1
    assert found["stuck"] == 0
    assert found["scope_violations"] == 0
    assert found["search_sample_misses"] == 1  # the write that was never stored
    assert (found["move_calls"], found["moves_without_home_in_view"]) == (2, 1)
