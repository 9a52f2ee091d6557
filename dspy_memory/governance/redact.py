"""Secret redaction before anything is stored (`MemoryConfig.redact`; docs/governance.md#secret-redaction).

Each secret found becomes `[REDACTED:<kind>]`. The token formats are detect-secrets' (its
plugins' own patterns: AWS, GitHub, GitLab, Slack, Stripe, OpenAI, JWT, passwords in URLs, ...),
so they are kept up to date by that project. What it does not cover is ours: card numbers
(checked with Luhn and an issuer's first digit) and the whole private-key block (detect-secrets
flags only the BEGIN line; the key is the lines after it). Its entropy and keyword plugins are
left out on purpose: they flag git SHAs, UUIDs and ordinary prose.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from dspy_memory.errors import InvalidInputError

if TYPE_CHECKING:
    from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector

Item = TypeVar("Item")

# kind -> the detect-secrets plugin whose patterns find it
PLUGIN_KINDS: Mapping[str, str] = {
    "aws_key": "AWSKeyDetector",
    "azure_storage_key": "AzureStorageKeyDetector",
    "url_password": "BasicAuthDetector",
    "artifactory_token": "ArtifactoryDetector",
    "cloudant_key": "CloudantDetector",
    "discord_token": "DiscordBotTokenDetector",
    "github_token": "GitHubTokenDetector",
    "gitlab_token": "GitLabTokenDetector",
    "ibm_cloud_iam_key": "IbmCloudIamDetector",
    "ibm_cos_hmac_key": "IbmCosHmacDetector",
    "jwt": "JwtTokenDetector",
    "mailchimp_key": "MailchimpDetector",
    "npm_token": "NpmDetector",
    "openai_key": "OpenAIDetector",
    "pypi_token": "PypiTokenDetector",
    "sendgrid_key": "SendGridDetector",
    "slack_token": "SlackDetector",
    "softlayer_key": "SoftlayerDetector",
    "square_oauth_secret": "SquareOAuthDetector",
    "stripe_key": "StripeDetector",
    "telegram_token": "TelegramBotTokenDetector",
    "twilio_key": "TwilioKeyDetector",
}
# Plugins whose patterns capture the secret in group 1 and match context around it (the
# `://user:` before a password, a keyword before a key); the others' whole match is the secret.
_SECRET_IN_GROUP = frozenset(
    {
        "BasicAuthDetector",
        "CloudantDetector",
        "IbmCloudIamDetector",
        "IbmCosHmacDetector",
        "SoftlayerDetector",
        "NpmDetector",
    }
)
OWN_KINDS = ("private_key", "card_number")
# The text an LM's write operation carries into the file (memory content, entity names, the
# reason kept in the event log).
LM_TEXT_FIELDS = ("content", "subject", "object", "reason")
KINDS: tuple[str, ...] = (*PLUGIN_KINDS, *OWN_KINDS)

# A private key: its BEGIN line, then up to its END line (also when the block sits on one line
# with escaped "\n", as in JSON or .env files), else, cut short, the base64 and header lines
# that follow it. Each repetition of _KEY_BODY starts at a line break: linear on hostile input.
_KEY_HEADER = re.compile(r"-----BEGIN ([A-Z0-9 ]{0,40})PRIVATE KEY( BLOCK)?-----")
_KEY_BODY = re.compile(r"(?:\r?\n(?:[A-Za-z0-9+/=]*|[A-Za-z-]{1,40}: [^\r\n]*)(?=\r?\n|\Z))*")
MAX_KEY_CHARS = 50_000  # an RSA 16384-bit key is ~13 kB; PGP key blocks are larger but rare
# 13-19 digits, optionally grouped by single spaces or dashes, not part of a longer number.
_CARD = re.compile(r"(?<![\w.])(?<!\d[ -])[2-6](?:[ -]?\d){12,18}(?![ -]?\d)(?!\w)")
_STRIP = " \t\r\n\"'=:"  # delimiters some patterns include around the token
_TOKEN_TAIL = re.compile(r"[\w\-.+/=]*")
# detect-secrets' keyword-assignment patterns (IBM Cloud IAM's measured: 2,000 spaces after
# "password" took 32 s) backtrack polynomially on long runs of spaces. No token holds such a
# run, so the plugins scan the text between them.
_LONG_SPACE = re.compile(r"\s{16,}")


# Others (npm's `//.+/:_authToken=`) are quadratic on one long line: the plugins scan windows
# of at most WINDOW characters, overlapping by more than any token is long.
WINDOW, OVERLAP = 4096, 1100


def _segments(text: str) -> Iterator[tuple[int, str]]:
    """(offset, piece) of the text the plugins scan: between long runs of spaces, in windows."""
    at = 0
    for end, next_at in [*((gap.start(), gap.end()) for gap in _LONG_SPACE.finditer(text)), (len(text), 0)]:
        start = at
        while True:
            yield start, text[start : min(end, start + WINDOW)]
            if start + WINDOW >= end:
                break
            start += WINDOW - OVERLAP
        at = next_at


def luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def kinds_from(setting: bool | Sequence[str] | None) -> tuple[str, ...]:
    """The kinds a `redact` setting names: True every kind, False/None none, or a list of kinds."""
    if setting is None or setting is False:
        return ()
    if setting is True:
        return KINDS
    if isinstance(setting, (str, bytes)) or not isinstance(setting, Iterable):
        raise InvalidInputError(f"redact takes True, False or a list of kinds from {list(KINDS)}")
    chosen = list(setting)
    unknown = [kind for kind in chosen if kind not in KINDS]
    if unknown or not chosen:
        raise InvalidInputError(f"unknown secret kinds {unknown!r:.200}; choose from {list(KINDS)}")
    return tuple(dict.fromkeys(chosen))


class Redactor:
    """Finds secrets in text and replaces each with `[REDACTED:<kind>]`."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.kinds = tuple(kinds)
        wanted = {PLUGIN_KINDS[kind]: kind for kind in self.kinds if kind in PLUGIN_KINDS}
        self._plugins: list[tuple[str, RegexBasedDetector, bool]] = []
        if wanted:
            try:
                from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
                from detect_secrets.plugins.base import RegexBasedDetector
            except ImportError as exc:
                raise InvalidInputError(
                    'redact needs detect-secrets for tokens and keys: pip install "dspy-memory[redact]" '
                    '(or redact=["card_number", "private_key"], which need nothing)'
                ) from exc
            plugins: dict[str, type[BasePlugin]] = get_mapping_from_secret_type_to_class()  # type: ignore[assignment]  # detect-secrets returns type[Plugin] of a TypeVar no argument binds (mypy: type[Never]); the classes are BasePlugins
            # Only pattern plugins: where a secret lies comes from their patterns (_tokens).
            classes = {cls.__name__: cls for cls in plugins.values() if issubclass(cls, RegexBasedDetector)}
            missing = sorted(set(wanted) - set(classes))
            if missing:
                raise InvalidInputError(f"this detect-secrets has no {missing}; install detect-secrets>=1.5")
            self._plugins = [
                (kind, classes[name](), name in _SECRET_IN_GROUP) for name, kind in wanted.items()
            ]

    def __bool__(self) -> bool:
        return bool(self.kinds)

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, kind) of every secret, left to right, overlaps merged (first kind wins)."""
        found = list(self._own(text))
        for offset, segment in _segments(text):
            found += self._tokens(segment, offset)
        merged: list[tuple[int, int, str]] = []
        for start, end, kind in sorted(found):
            if merged and start < merged[-1][1]:
                last = merged[-1]
                merged[-1] = (last[0], max(last[1], end), last[2])
            else:
                merged.append((start, end, kind))
        return merged

    def _tokens(self, text: str, offset: int) -> list[tuple[int, int, str]]:
        """The plugins' finds in one segment of the text (positions shifted by `offset`)."""
        found: list[tuple[int, int, str]] = []
        for kind, plugin, in_group in self._plugins:
            # analyze_string is the plugin's own verdict (e.g. a JWT's parts must decode); the
            # patterns then give where. It also yields only a prefix for some patterns, so a
            # match counts when any value the plugin yields lies inside it.
            values = [value for value in plugin.analyze_string(text) if value]
            if not values:
                continue
            for pattern in plugin.denylist:
                for match in pattern.finditer(text):
                    start, end = (
                        match.span(1) if in_group and pattern.groups and match.group(1) else match.span()
                    )
                    if not any(value in match.group(0) for value in values):
                        continue
                    while start < end and text[start] in _STRIP:
                        start += 1
                    while end > start and text[end - 1] in _STRIP:
                        end -= 1
                    if not in_group:
                        # Some patterns stop early (a JWT's is lazy): the rest of the token goes too.
                        tail = _TOKEN_TAIL.match(text, end)
                        assert tail is not None, "the tail pattern matches the empty string too"
                        end = tail.end()
                        while end > start and text[end - 1] == ".":
                            end -= 1
                    if start < end:
                        found.append((start + offset, end + offset, kind))
        return found

    def _own(self, text: str) -> Iterator[tuple[int, int, str]]:
        if "private_key" in self.kinds and "PRIVATE KEY" in text:
            for header in _KEY_HEADER.finditer(text):
                label, block = header.group(1), header.group(2) or ""
                end_line = f"-----END {label}PRIVATE KEY{block}-----"
                stop = text.find(end_line, header.end(), header.end() + MAX_KEY_CHARS)
                if stop >= 0:
                    yield header.start(), stop + len(end_line), "private_key"
                else:
                    body = _KEY_BODY.match(text, header.end())
                    yield header.start(), body.end() if body else header.end(), "private_key"
        if "card_number" in self.kinds:
            for match in _CARD.finditer(text):
                digits = re.sub(r"[ -]", "", match.group(0))
                if 13 <= len(digits) <= 19 and luhn_valid(digits):
                    yield match.start(), match.end(), "card_number"

    def text(self, text: str) -> str:
        """`text` with every secret replaced by `[REDACTED:<kind>]`."""
        if not self.kinds or not text:
            return text
        spans = self.spans(text)
        if not spans:
            return text
        parts, at = [], 0
        for start, end, kind in spans:
            parts += [text[at:start], f"[REDACTED:{kind}]"]
            at = end
        parts.append(text[at:])
        return "".join(parts)

    def optional(self, text: str | None) -> str | None:
        return self.text(text) if isinstance(text, str) else text

    def fields(self, item: Item, names: Iterable[str]) -> Item:
        """A pydantic model (an LM's operation) with its text fields `names` redacted."""
        if not self.kinds or not isinstance(item, BaseModel):
            return item
        changes = {}
        for name in names:
            value = getattr(item, name, None)
            if isinstance(value, str) and (redacted := self.text(value)) != value:
                changes[name] = redacted
        return item.model_copy(update=changes) if changes else item

    def json(self, value: Any) -> Any:
        """Every string value inside `value` redacted (dict keys are names and stay as they are)."""
        if not self.kinds:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: self.json(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.json(item) for item in value]
        return value


NO_REDACTION = Redactor(())


def redactor_for(setting: bool | Sequence[str] | None) -> Redactor:
    """The Redactor of a `MemoryConfig.redact` setting; raises a clear error when a kind needs
    detect-secrets and it is not installed."""
    kinds = kinds_from(setting)
    return Redactor(kinds) if kinds else NO_REDACTION
