"""The ingest benchmark is not a timed test; this keeps the script from rotting, and checks what
it reports: every message of each file stored once, all of them `already` there on the re-run,
and the ceiling measured before and after on the sample asked for."""

import json

from evals.bench_ingest import HEADERS, main, write_synthetic


def tiny_locomo(path):
    turns = [
        {"speaker": "Ada" if i % 2 else "Ben", "dia_id": f"D1:{i + 1}", "text": f"turn {i} about the garden"}
        for i in range(12)
    ]
    sample = {
        "sample_id": "t1",
        "conversation": {
            "speaker_a": "Ada",
            "speaker_b": "Ben",
            "session_1": turns,
            "session_1_date_time": "1:56 pm on 8 May, 2023",
        },
    }
    path.write_text(json.dumps([sample]))
    return path


def test_bench_ingest_stores_every_message_once_and_reruns_as_already(tmp_path, capsys):
    out = tmp_path / "i.json"
    argv = [
        *("--locomo", str(tiny_locomo(tmp_path / "locomo.json")), "--synthetic", "400"),
        *("--embedder", "test", "--ceiling-sample", "50", "--batch-size", "64"),
        *("--out", str(out), "--plot", str(tmp_path / "i.png")),
    ]
    assert main(argv) == 0
    data = json.loads(out.read_text())
    results = data["results"]
    assert [(r["dataset"], r["messages"]) for r in results] == [
        ("locomo dev", 12),
        ("synthetic 40", 40),
        ("synthetic 400", 400),
    ]
    for r in results:
        assert r["messages"] == r["messages in file"] == r["stored"] == r["memories"]
        assert r["re-run already"] == r["messages"] and r["re-run stored"] == 0
        assert r["child"]["stored rows"] == r["messages"]
        assert r["ceiling texts"] == min(50, r["messages"])
        for column in ("memories/s", "ceiling texts/s before", "ceiling texts/s after", "peak RSS MB"):
            assert r[column] > 0
        assert r["db MB"] > 0 and r["input MB"] > 0 and r["ingest/ceiling"] > 0
    assert data["machine"]["cpus"] and data["args"]["batch_size"] == 64
    printed = capsys.readouterr().out
    assert all(header in printed for header in HEADERS)
    assert printed.count("of the embedder's batched rate (>= 90%: ") == 3
    assert (tmp_path / "i.png").exists() and (tmp_path / "i.md").exists()


def test_synthetic_file_has_named_speakers_times_and_lengths_like_locomo(tmp_path):
    path = write_synthetic(tmp_path / "s.jsonl", 500, seed=1)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) == 500
    assert path.read_text() == write_synthetic(tmp_path / "t.jsonl", 500, seed=1).read_text()  # seeded
    words = [len(r["content"].split()) for r in records]
    assert 18 <= sum(words) / len(words) <= 26 and min(words) >= 4
    sizes = {}
    for r in records:
        sizes.setdefault(r["conversation"], set()).add(r["name"])
        assert r["at"].endswith("Z") and r["role"] == "user"
    assert all(len(names) == 2 for names in sizes.values())
