"""Loader for LoCoMo (snap-research/locomo) in its released JSON format.

Get the data once (about 3 MB; CC BY-NC 4.0: use it for evaluation, never copy it into this
repository):

    python -m evals.locomo download          # -> data/locomo10.json, sha256 checked

or download https://github.com/snap-research/locomo/blob/3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376/data/locomo10.json
yourself (sha256 79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4). Every eval
that reads LoCoMo takes `--data FILE` (default: data/locomo10.json, or $LOCOMO_DATA) and
`--split dev|test|all` (default: dev of the released file, the whole of any other file). Our
numbers are on the development split: the five conversations in DEV_CONVERSATIONS (2,760 turns,
999 questions); `split` writes them to a file of their own.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

LOCOMO_URL = (
    "https://raw.githubusercontent.com/snap-research/LoCoMo/"
    "3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376/data/locomo10.json"
)
LOCOMO_SHA256 = "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"

# Category numbers as released; names follow the LoCoMo paper's README order used by most
# memory papers (some tables swap the names of 1 and 4).
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}

_DIA_ID = re.compile(r"D(\d+):(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)$")
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
ROOT = Path(__file__).resolve().parents[1]
# Where `download` puts the file; $LOCOMO_DATA points elsewhere (the tests use it).
DEFAULT_DATA = Path(os.environ.get("LOCOMO_DATA") or ROOT / "data" / "locomo10.json")
# The development split: five of the ten conversations. The other five are held out (test).
DEV_CONVERSATIONS = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
SPLITS = ("dev", "test", "all")


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    blip_caption: str | None = None

    def content(self, *, with_caption: bool = True) -> str:
        """The turn's text, with the caption of a shared photo appended."""
        if with_caption and self.blip_caption:
            return f"{self.text} [shared a photo: {self.blip_caption}]"
        return self.text


@dataclass
class Session:
    index: int
    date_time: datetime
    turns: list[Turn]


@dataclass
class Question:
    question: str
    answer: str
    category: int
    evidence: list[str]
    adversarial_answer: str | None = None

    @property
    def category_name(self) -> str:
        return CATEGORY_NAMES.get(self.category, str(self.category))


@dataclass
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: list[Session]
    questions: list[Question]
    observations: dict = field(default_factory=dict)

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session.turns]


def normalize_dia_ids(raw: object) -> list[str]:
    """Evidence ids as "D<session>:<turn>" without zero padding; garbage is dropped."""
    items = raw if isinstance(raw, list) else [raw]
    ids: list[str] = []
    for item in items:
        for session, turn in _DIA_ID.findall(str(item)):
            dia_id = f"D{int(session)}:{int(turn)}"
            if dia_id not in ids:
                ids.append(dia_id)
    return ids


def parse_session_date(text: str) -> datetime:
    return datetime.strptime(text.strip(), _DATE_FORMAT).replace(tzinfo=timezone.utc)


def _conversation(record: dict) -> Conversation:
    raw = record["conversation"]
    sessions = []
    numbers = sorted(
        int(match.group(1))
        for key in raw
        if (match := _SESSION_KEY.match(key)) and isinstance(raw[key], list)
    )
    for number in numbers:
        turns = [
            Turn(
                dia_id=normalize_dia_ids(turn["dia_id"])[0],
                speaker=turn["speaker"],
                text=turn.get("text", ""),
                blip_caption=turn.get("blip_caption"),
            )
            for turn in raw[f"session_{number}"]
        ]
        sessions.append(Session(number, parse_session_date(raw[f"session_{number}_date_time"]), turns))
    questions = [
        Question(
            question=item["question"],
            answer=str(item.get("answer", item.get("adversarial_answer", ""))),
            category=int(item["category"]),
            evidence=normalize_dia_ids(item.get("evidence", [])),
            adversarial_answer=item.get("adversarial_answer"),
        )
        for item in record.get("qa", [])
    ]
    return Conversation(
        sample_id=record["sample_id"],
        speaker_a=raw["speaker_a"],
        speaker_b=raw["speaker_b"],
        sessions=sessions,
        questions=questions,
        observations=record.get("observation", {}),
    )


def load_locomo(path: str | Path) -> list[Conversation]:
    """Read a LoCoMo file (a JSON list of conversations)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no LoCoMo file at {path}; download it (about 3 MB, checked) with: "
            f"python -m evals.locomo download --out {path}"
        )
    with path.open(encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, list) or not all(
        isinstance(item, dict) and "conversation" in item for item in data
    ):
        raise ValueError(f"{path} is not in the LoCoMo format (a list of conversations)")
    return [_conversation(record) for record in data]


def select_split(conversations: list[Conversation], split: str = "auto") -> list[Conversation]:
    """The conversations of a split: "dev" (DEV_CONVERSATIONS), "test" (the others) or "all".
    "auto" is "dev" for a file that holds both splits (the released file) and "all" for any
    other (a split written by `split`, or a file of your own)."""
    if split not in (*SPLITS, "auto"):
        raise ValueError(f"unknown LoCoMo split {split!r}; choose one of {', '.join(SPLITS)}")
    if split == "auto":
        dev = {c.sample_id for c in conversations} & set(DEV_CONVERSATIONS)
        split = "dev" if dev and len(dev) < len(conversations) else "all"
    if split == "all":
        return conversations
    dev = split == "dev"
    return [c for c in conversations if (c.sample_id in DEV_CONVERSATIONS) == dev]


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """--data and --split, the same on every eval that reads LoCoMo."""
    parser.add_argument(
        "--data",
        default=str(DEFAULT_DATA),
        help="a LoCoMo JSON file (default: data/locomo10.json, from `python -m evals.locomo download`)",
    )
    parser.add_argument(
        "--split",
        choices=(*SPLITS, "auto"),
        default="auto",
        help="conversations to use: dev, test or all (default: dev of the released file, all of any other)",
    )


def conversations_from_args(args: argparse.Namespace) -> list[Conversation]:
    conversations = select_split(load_locomo(args.data), args.split)
    if not conversations:
        raise SystemExit(f"{args.data} has no conversation of the {args.split} split; try --split all")
    return conversations


def fetch_locomo(dest: str | Path, *, url: str = LOCOMO_URL, sha256: str | None = LOCOMO_SHA256) -> Path:
    """Download the public LoCoMo file and check its hash (needs a network). Nothing is written
    unless the hash matches."""
    dest = Path(dest)
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - fixed https URL
        payload = response.read()
    digest = hashlib.sha256(payload).hexdigest()
    if sha256 is not None and digest != sha256:
        raise ValueError(
            f"downloaded LoCoMo file has sha256 {digest}, expected {sha256}; nothing was written"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(payload)
    return dest


def write_split(source: str | Path, dest: str | Path, split: str = "dev") -> int:
    """Write the conversations of `split` from `source` to `dest`, in the released format."""
    records = json.loads(Path(source).read_text(encoding="utf-8"))
    chosen = {c.sample_id for c in select_split([_conversation(r) for r in records], split)}
    kept = [record for record in records if record.get("sample_id") in chosen]
    Path(dest).parent.mkdir(parents=True, exist_ok=True)
    Path(dest).write_text(json.dumps(kept, ensure_ascii=False), encoding="utf-8")
    return len(kept)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m evals.locomo", description="Get, split or summarize LoCoMo."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("download", help="download data/locomo10.json from GitHub and check its sha256")
    p.add_argument("--out", default=str(ROOT / "data" / "locomo10.json"), help="where to write it")
    p = sub.add_parser("split", help="write one split of a LoCoMo file to a file of its own")
    p.add_argument("--data", default=str(DEFAULT_DATA), help="the full LoCoMo file")
    p.add_argument("--split", choices=SPLITS, default="dev", help="which split (default dev)")
    p.add_argument("--out", required=True, help="where to write it")
    p = sub.add_parser("summary", help="count the conversations, turns and questions of a file")
    p.add_argument("--data", default=str(DEFAULT_DATA), help="a LoCoMo file")
    p.add_argument("--split", choices=SPLITS, default="all", help="which split (default all)")
    args = parser.parse_args(argv)
    if args.command == "download":
        print(f"downloading {LOCOMO_URL} ...", file=sys.stderr)  # globals: tests serve their own
        path = fetch_locomo(args.out, url=LOCOMO_URL, sha256=LOCOMO_SHA256)
        print(f"wrote {path} (sha256 {LOCOMO_SHA256[:16]}... checked; CC BY-NC 4.0)")
    elif args.command == "split":
        count = write_split(args.data, args.out, args.split)
        print(f"wrote {count} conversations of the {args.split} split to {args.out}")
    else:
        conversations = select_split(load_locomo(args.data), args.split)
        questions = [q for c in conversations for q in c.questions]
        print(
            f"{len(conversations)} conversations, {sum(len(c.turns) for c in conversations)} turns, "
            f"{len(questions)} questions"
        )


if __name__ == "__main__":
    main()
