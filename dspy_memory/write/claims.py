"""Episode claims: one writer at a time processes an episode.

A writer claims the episodes it is about to process with a token naming it ("host:pid:writer")
and an expiry. Replay and `reprocess()` in any process take only free episodes, episodes whose
claim expired, and episodes claimed by a process of this machine that no longer runs (a writer
killed mid-batch), each with a compare-and-set on the claim it saw. The write transaction that
applies a batch checks that the writer still holds every episode in it, so even a writer that
outlived its lease cannot apply a batch another writer has taken over.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Sequence
from pathlib import Path

from dspy_memory.errors import StorageError
from dspy_memory.store.episodes import Claim, EpisodeLog, Unfinished
from dspy_memory.types import Episode
from dspy_memory.util.timeutil import now_db, to_db, utcnow

logger = logging.getLogger("dspy_memory")


def process_gone(pid: int) -> bool:
    """Whether process `pid` of this machine no longer runs (a zombie counts as gone). False
    when it cannot be told (then only the lease frees its claims)."""
    if os.name != "posix" or pid <= 0:
        return False  # os.kill(pid, 0) would terminate the process on Windows
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by another user
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


class Claimant:
    """The claims of one writer (one Writer object)."""

    def __init__(self, episodes: EpisodeLog, *, lease_seconds: float) -> None:
        self._episodes = episodes
        self._lease = lease_seconds
        self._host = socket.gethostname()
        self._writer = uuid.uuid4().hex[:12]
        # Releases the store could not write (a full disk): None releases all of them.
        self._unreleased: list[list[str] | None] = []

    @property
    def token(self) -> str:
        # The pid is read each time: a writer object inherited by a forked child is not its parent.
        return f"{self._host}:{os.getpid()}:{self._writer}"

    def claim(self) -> Claim:
        """A claim of this writer from now until the lease ends."""
        return Claim(self.token, to_db(utcnow().timestamp() + self._lease) or now_db())

    def renew(self, ids: Sequence[str]) -> None:
        self._episodes.renew(ids, self.claim())

    def release(self, ids: Sequence[str] | None = None) -> None:
        """Give up the claims this writer still holds on `ids` (None: all of them): what it did
        not finish is free for any writer again. When the store cannot write now (a full disk),
        `settle()` gives them up before this writer takes episodes again; other writers wait
        for the lease to end. Never raises a StorageError: it comes after one, or at close."""
        try:
            self._episodes.release(ids, self.token)
        except StorageError as exc:
            logger.warning("claims on episodes kept until the store can write again: %s", exc)
            self._unreleased.append(None if ids is None else list(ids))

    def settle(self) -> None:
        """Give up the claims an earlier `release` could not (raises while it still cannot)."""
        while self._unreleased:
            self._episodes.release(self._unreleased[0], self.token)
            self._unreleased.pop(0)

    def held(self, ids: Sequence[str]) -> set[str]:
        return self._episodes.held(ids, self.token)

    def take(self, found: Unfinished) -> list[Episode]:
        """Claim the unfinished episodes nobody else is working on; returns those taken."""
        now = now_db()
        free = {e.id: found.claims[e.id] for e in found.episodes if self._free(found.claims[e.id], now)}
        taken = set(self._episodes.claim(free, self.claim())) if free else set()
        return [episode for episode in found.episodes if episode.id in taken]

    def _free(self, claim: Claim | None, now: str) -> bool:
        if claim is None or claim.expires_at < now:
            return True
        if claim.token == self.token:
            return False  # this writer is processing it right now (another thread)
        host, _, rest = claim.token.partition(":")
        pid = rest.partition(":")[0]
        return host == self._host and pid.isdigit() and int(pid) != os.getpid() and process_gone(int(pid))
