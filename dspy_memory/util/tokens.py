"""Token counting with a real tokenizer when one is available offline.

tiktoken's cl100k_base (GPT-4's encoding) is used when its data file can be found without a
network: litellm, a DSPy dependency, ships it. Otherwise a word-and-punctuation estimate is used
(within ~15% of cl100k_base on English prose).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from collections.abc import Callable
from pathlib import Path

_PIECES = re.compile(r"\w+|[^\w\s]")


def _bundled_tiktoken_dir() -> str | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return str(folder) if folder.is_dir() else None


@functools.lru_cache(maxsize=1)
def _encoder() -> Callable[[str], int] | None:
    try:
        import tiktoken
    except ImportError:
        return None
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    bundled = _bundled_tiktoken_dir()
    try:
        if previous is None and bundled is not None:
            os.environ["TIKTOKEN_CACHE_DIR"] = bundled
        encoding = tiktoken.get_encoding("cl100k_base")
    except Exception:  # no network and no bundled file: estimate instead
        return None
    finally:
        if previous is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def tokenizer_name() -> str:
    return "cl100k_base" if _encoder() is not None else "estimate"


def count_tokens(text: str) -> int:
    """Tokens in `text` by cl100k_base, or an estimate when tiktoken's data is unavailable."""
    encode = _encoder()
    if encode is not None:
        return encode(text)
    return int(len(_PIECES.findall(text)) * 1.1)
