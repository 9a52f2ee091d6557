"""Loader for LoCoMo (snap-research/LoCoMo) in its released JSON format.

Takes any file in that format: the 5-conversation development split in ../shared/data/locomo/
or the full `locomo10.json`. `fetch_locomo` downloads the public file where a network exists.
The data is CC BY-NC 4.0: use it for evaluation, never copy it into this repository.
"""

from __future__ import annotations

import hashlib
import json
import re
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
# The development split next to the repository (../shared/data), when it is there.
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev5.json"


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
            f"no LoCoMo file at {path}; the development split is in ../shared/data/locomo/, "
            "or download the full set with: python -m evals.locomo --fetch locomo10.json"
        )
    with path.open(encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, list) or not all(
        isinstance(item, dict) and "conversation" in item for item in data
    ):
        raise ValueError(f"{path} is not in the LoCoMo format (a list of conversations)")
    return [_conversation(record) for record in data]


def fetch_locomo(dest: str | Path, *, url: str = LOCOMO_URL, sha256: str | None = LOCOMO_SHA256) -> Path:
    """Download the public LoCoMo file and check its hash (needs a network)."""
    dest = Path(dest)
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - fixed https URL
        payload = response.read()
    digest = hashlib.sha256(payload).hexdigest()
    if sha256 is not None and digest != sha256:
        raise ValueError(f"downloaded LoCoMo file has sha256 {digest}, expected {sha256}")
    dest.write_bytes(payload)
    return dest


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Fetch or summarize a LoCoMo file.")
    parser.add_argument("path", help="LoCoMo JSON file")
    parser.add_argument("--fetch", action="store_true", help="download the public file to PATH first")
    args = parser.parse_args()
    if args.fetch:
        fetch_locomo(args.path)
    conversations = load_locomo(args.path)
    questions = [q for c in conversations for q in c.questions]
    print(
        f"{len(conversations)} conversations, {sum(len(c.turns) for c in conversations)} turns, "
        f"{len(questions)} questions"
    )
