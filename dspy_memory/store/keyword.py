"""Safe FTS5 query building. User text never reaches MATCH except as quoted terms."""

from __future__ import annotations

import hashlib
import re

# Letters and digits only: FTS5's unicode61 tokenizer splits on everything else, and a quoted
# string of separators would be an empty phrase.
_TERM = re.compile(r"[^\W_]+", re.UNICODE)

# Dropped from keyword queries: they match most rows (the slowest part of BM25) while adding
# almost nothing to the ranking. A query made only of stopwords keeps them.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves
    out over own same she should so some such than that the their theirs them themselves then
    there these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves
    """.split()
)


def query_terms(text: str, *, drop_stopwords: bool = True, max_terms: int = 32) -> list[str]:
    """Lower-cased, de-duplicated search terms of `text`, in order of first appearance."""
    if not isinstance(text, str):
        raise TypeError(f"a search query must be a string, not {type(text).__name__}")
    terms = list(dict.fromkeys(match.group().lower() for match in _TERM.finditer(text)))
    if drop_stopwords:
        content = [term for term in terms if term not in STOPWORDS]
        terms = content or terms
    return terms[:max_terms]


def match_expression(terms: list[str], scope_tokens: list[str] | None = None) -> str | None:
    """An FTS5 MATCH string: any of `terms` in `content`, all of `scope_tokens` in `scope`."""
    if not terms:
        return None
    # Terms hold only letters and digits; quoting makes FTS5 read keywords such as OR, NOT
    # and NEAR as plain words.
    content = " OR ".join(f'"{term}"' for term in terms)
    expression = f"content : ({content})"
    if scope_tokens:
        scope = " AND ".join(f'"{token}"' for token in scope_tokens)
        expression = f"scope : ({scope}) AND {expression}"
    return expression


def scope_token(kind: str, value: str) -> str:
    """An opaque FTS token for one scope id. Digits-only tail so stemming cannot alter it."""
    digest = hashlib.blake2b(value.encode("utf-8"), digest_size=8).digest()
    return f"{kind}{int.from_bytes(digest, 'big')}"


def scope_tokens(user_id: str | None, agent_id: str | None, run_id: str | None) -> list[str]:
    tokens = []
    if user_id is not None:
        tokens.append(scope_token("u", user_id))
    if agent_id is not None:
        tokens.append(scope_token("a", agent_id))
    if run_id is not None:
        tokens.append(scope_token("r", run_id))
    return tokens
