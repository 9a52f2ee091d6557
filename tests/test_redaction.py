"""Secret redaction (MemoryConfig.redact; docs/governance.md#secret-redaction): secrets become
[REDACTED:<kind>] before anything is stored, in episodes, memories (raw and LM-written), updates,
blocks and metadata; a byte scan of the file finds none; ordinary text is left alone."""

from __future__ import annotations

import json
import sys
import time

import dspy
import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import InvalidInputError
from dspy_memory.governance.redact import KINDS, PLUGIN_KINDS, Redactor, luhn_valid, redactor_for
from dspy_memory.types import Scope

from .leakscan import leaks
from .scripted import fused_lm

KEY_BODY = "MIIEowIBAAKCAQEAzq1x2y3w4v5u6t7s8r9q0p1o2n3m4l5k6j7i8h9g0f"
PRIVATE_KEY = (
    f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\nqrstuvwxyz0123456789+/==\n-----END RSA PRIVATE KEY-----"
)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFkYSJ9."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
# kind -> (the secret, a sentence carrying it)
SECRETS = {
    "aws_key": ("AKIAZQ7TESTKEYZ4Q2XA", "Ada's AWS key is {} for the backups."),
    "github_token": ("ghp_zq0a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6q", "Use {} for the repo."),
    "gitlab_token": ("glpat-zqAbCdEfGhIjKlMnOpQr", "The GitLab token: {}"),
    "slack_token": ("xoxb-123456789012-1234567890123-zqabcdefghijklmnop", "Slack bot {} posts alerts."),
    "stripe_key": ("sk_live_zq1234567890abcdefghijkl", "Stripe live key {}."),
    "openai_key": ("sk-proj-zqabcdefghijklmnopqrT3BlbkFJzqabcdefghijklmnopqr", "OpenAI: {}"),
    "jwt": (JWT, "Her session token was {} yesterday."),
    "url_password": ("Hunter2passQ7", "Connect to postgres://ada:{}@db.example.com:5432/app now."),
    "sendgrid_key": (
        "SG.zqabcdefghijklmnopqrst.zqabcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
        "Mail via {}",
    ),
    "card_number": ("4111 1111 1111 1111", "Ada's card is {} (expires 12/27)."),
    "private_key": (PRIVATE_KEY, "Her deploy key:\n{}\nKeep it safe."),
}
ORDINARY = [
    "Ada moved to Denver on 2024-03-08 and her phone is +1 (555) 123-4567.",
    "Order 1234567812345678 shipped; invoice 2024-0001-77.",  # 16 digits, Luhn fails
    "The request id was 123e4567-e89b-12d3-a456-426614174000.",
    "Fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b, see https://github.com/org/repo/pull/42.",
    "Call me at 030 1234567 or email ada@example.com; the key word is 'password'.",
    "Visit https://example.com:8443/path?q=1&x=2 and ssh git@github.com:org/repo.git.",
    "Flight LH 1234 leaves at 09:45, seat 14C, booking ref ZQX7Y2, gate B12.",
    "Pi is 3.14159265358979323846 and the ISBN is 978-3-16-148410-0.",
]


def with_secret(kind: str) -> tuple[str, str]:
    secret, sentence = SECRETS[kind]
    return secret, sentence.format(secret)


@pytest.fixture
def redacting(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), redact=True) as memory:
        yield memory


def test_every_kind_is_detectable_and_the_plugins_exist():
    assert set(SECRETS) <= set(KINDS)
    redactor = redactor_for(True)
    for kind in SECRETS:
        secret, text = with_secret(kind)
        redacted = redactor.text(text)
        assert f"[REDACTED:{kind}]" in redacted and secret not in redacted, (kind, redacted)
    assert len(redactor._plugins) == len(PLUGIN_KINDS)  # every plugin named is in detect-secrets


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_kind_is_redacted_in_episodes_and_raw_memories(redacting, db_path, kind):
    secret, text = with_secret(kind)
    result = redacting.add({"role": "user", "content": text}, user_id="ada")
    [episode], [record] = result.episodes, result.memories
    assert f"[REDACTED:{kind}]" in episode.content and secret not in episode.content
    assert record.content == episode.content
    stored = redacting.store.episodes.list(Scope(user_id="ada"))
    assert [e.content for e in stored] == [episode.content]
    redacting.close()
    assert leaks(db_path, [secret]) == []


def test_lm_written_facts_and_every_other_way_in_are_redacted(db_path):
    """The LM writes the secrets back (as if it rebuilt them); updates, blocks, metadata and
    JSON input carry them too. Nothing of them reaches the file; the same run without
    redaction leaves them all there (the scan can fail)."""
    secrets = {kind: with_secret(kind)[0] for kind in SECRETS}

    def leak_back(turns, existing):
        return [
            {
                "action": "ADD",
                "content": f"Ada uses {secret} at work.",
                "subject": secret,
                "object": "work",
                "reason": f"saw {secret}",
            }
            for secret in (secrets["github_token"], secrets["aws_key"], secrets["card_number"])
        ]

    def write_everything(redact):
        with Memory(db_path, embedder=HashEmbedder(64), redact=redact) as memory:
            with dspy.context(lm=fused_lm(leak_back)):
                made = memory.add("Ada set up her tools today.", user_id="ada").memories
            assert len(made) == 3
            for kind in secrets:
                _, text = with_secret(kind)  # (a password is a secret only inside its URL)
                memory.add(text, user_id="ada", infer=False, metadata={"note": text, "n": 1})
                memory.add({"kind": kind, "nested": {"value": [text]}}, user_id="ada", infer=False)
            memory.update(
                made[0].id, f"Ada rotated to {secrets['stripe_key']}.", reason=secrets["jwt"], user_id="ada"
            )
            memory.blocks.set("human", f"Name: Ada\nDB {with_secret('url_password')[1]}", user_id="ada")
            memory.blocks.append(
                "human", secrets["openai_key"], user_id="ada", reason=secrets["gitlab_token"]
            )
            memory.blocks.replace("human", "Name: Ada", f"Name: Ada {secrets['slack_token']}", user_id="ada")
            return memory.get_all(user_id="ada", limit=200)

    records = write_everything(True)
    lm_facts = [r for r in records if r.kind != "turn"]
    assert {r.content for r in lm_facts} == {
        "Ada rotated to [REDACTED:stripe_key].",  # the first fact, updated
        "Ada uses [REDACTED:aws_key] at work.",
        "Ada uses [REDACTED:card_number] at work.",
    }
    assert leaks(db_path, list(secrets.values()) + [KEY_BODY]) == []
    # The control: the same writes into another file, redaction off.
    db_path = (
        db_path.replace(".db", "-plain.db") if isinstance(db_path, str) else db_path.with_name("plain.db")
    )
    write_everything(False)
    found = leaks(str(db_path), list(secrets.values()) + [KEY_BODY])
    assert {hit.split(": ", 1)[1] for hit in found} >= {s.lower() for s in secrets.values() if " " not in s}


def test_ordinary_text_is_left_alone(redacting):
    redactor = redactor_for(True)
    for text in ORDINARY:
        assert redactor.text(text) == text
        [episode] = redacting.add(text, user_id="ada").episodes
        assert episode.content == text
    assert not luhn_valid("1234567812345678") and luhn_valid("4111111111111111")


def test_redaction_off_stores_everything_verbatim(db_path):
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        for kind in SECRETS:
            _, text = with_secret(kind)
            [episode] = memory.add(text, user_id="ada", metadata={"k": text}).episodes
            assert episode.content == text and episode.metadata == {"k": text}
        assert memory.config.redact is False


def test_only_the_chosen_kinds(db_path):
    with Memory(db_path, embedder=HashEmbedder(64), redact=["card_number"]) as memory:
        text = f"{with_secret('card_number')[1]} {with_secret('github_token')[1]}"
        [episode] = memory.add(text, user_id="ada").episodes
        assert "[REDACTED:card_number]" in episode.content and SECRETS["github_token"][0] in episode.content
    for bad in (["cards"], "card_number", [], 3):
        with pytest.raises((InvalidInputError, ValueError), match="kinds|redact"):
            Memory(db_path, embedder=HashEmbedder(64), redact=bad)


def test_without_detect_secrets_a_clear_error_at_construction(db_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "detect_secrets.core.plugins.util", None)
    with pytest.raises(InvalidInputError, match=r'pip install "dspy-memory\[redact\]"'):
        Memory(db_path, embedder=HashEmbedder(64), redact=True)
    # Our own kinds need nothing.
    assert Redactor(["card_number", "private_key"]).text(PRIVATE_KEY) == "[REDACTED:private_key]"


def test_private_keys_whole_cut_short_or_on_one_line():
    redactor = redactor_for(["private_key"])
    assert redactor.text(f"key:\n{PRIVATE_KEY}\nThanks, Ada") == "key:\n[REDACTED:private_key]\nThanks, Ada"
    cut = PRIVATE_KEY.rsplit("\n", 1)[0]  # no END line: the base64 lines after BEGIN go
    assert redactor.text(f"{cut}\n\nThanks, Ada") in (
        "[REDACTED:private_key]\nThanks, Ada",  # (a blank line may go with the key lines)
        "[REDACTED:private_key]\n\nThanks, Ada",
    )
    escaped = json.dumps({"key": PRIVATE_KEY})  # "\n" escaped, one line
    assert KEY_BODY not in redactor.text(escaped) and "[REDACTED:private_key]" in redactor.text(escaped)
    pgp = (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: 1\n\nlQOYBF0zq\n-----END PGP PRIVATE KEY BLOCK-----"
    )
    assert redactor.text(pgp) == "[REDACTED:private_key]"


def test_hostile_inputs_stay_fast_and_are_redacted(redacting):
    redactor = redactor_for(True)
    many = " filler ".join(with_secret(kind)[1] for kind in SECRETS for _ in range(40))
    started = time.perf_counter()
    redacted = redactor.text(many)
    assert time.perf_counter() - started < 5
    assert all(SECRETS[kind][0] not in redacted for kind in SECRETS)
    assert redacted.count("[REDACTED:") == 40 * len(SECRETS)
    # Long runs that make detect-secrets' own patterns backtrack (measured: 32 s for 2,000
    # spaces after "password" in IBM's, quadratic for npm's on one long line).
    for text in (
        "password" + " " * 200_000 + "x",
        "://a:" * 50_000,
        "4 " * 100_000,
        "-----BEGIN RSA PRIVATE KEY-----" * 20_000,
    ):
        started = time.perf_counter()
        redactor.text(text)
        assert time.perf_counter() - started < 5, text[:20]
    huge = "Ada likes tea. " * 60_000 + with_secret("github_token")[1]
    [episode] = redacting.add(huge, user_id="ada", infer=False).episodes
    assert episode.content.endswith("Use [REDACTED:github_token] for the repo.")


def test_an_import_into_a_redacting_store_redacts_the_file_text(tmp_path):
    """Importing persists too: a file exported before redaction was on (or from another store)
    goes through the store's redactor like any add: no secret reaches the file, and the vector
    of a memory whose text changed is computed here (the file's encodes the secret)."""
    token = SECRETS["github_token"][0]
    card = SECRETS["card_number"][0]
    with Memory(str(tmp_path / "open.db"), embedder=HashEmbedder(64)) as source:
        source.add([f"Use {token} for the repo.", "Ada likes tea."], user_id="ada", metadata={"note": card})
        source.blocks.set("human", f"Ada's card: {card}", user_id="ada")
        exported = tmp_path / "ada.jsonl"
        source.export(str(exported), user_id="ada", include_embeddings=True)
    assert token in exported.read_text()  # the scan below could find it
    target = tmp_path / "redacting.db"
    with Memory(str(target), embedder=HashEmbedder(64), redact=True) as memory:
        with pytest.raises(Exception, match="redaction changed"):
            memory.import_(str(exported), reembed="never")
        report = memory.import_(str(exported))
        assert report.new["memory"] == 2 and report.reembedded == 1  # the tea is taken from the file
        contents = sorted(record.content for record in memory.get_all(user_id="ada"))
        assert contents == ["Ada likes tea.", "Use [REDACTED:github_token] for the repo."]
        assert memory.search("repo", user_id="ada")[0].content.startswith("Use [REDACTED")
        assert "[REDACTED:card_number]" in memory.blocks.get("human", user_id="ada").value
        assert memory.check().ok
        again = memory.import_(str(exported))
        assert not again.changed and again.present["memory"] == 2  # idempotent, redacted alike
    assert leaks(str(target), [token, card.replace(" ", ""), card]) == []
