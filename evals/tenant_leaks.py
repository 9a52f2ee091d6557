"""Cross-tenant checks of the memory service (evals/bench_server.py): which hits belong to
another tenant, and a final probe of every way one tenant could reach the other's memories."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

from evals.served import TENANTS, other

RECIPES = ("dense", "keyword", "hybrid")


def foreign(hits: Iterable[tuple[str, str | None]], tenant: str) -> list[str]:
    """The hits `tenant` must not see: (content, user_id or None) without its marker, with the
    other tenant's, or of another user."""
    own, others = TENANTS[tenant], TENANTS[other(tenant)]
    return [
        content
        for content, user in hits
        if own not in content or others in content or (user is not None and user != tenant)
    ]


def hits_of(path: str, payload: Any) -> list[tuple[str, str | None]]:
    """(content, user_id) of the hits in a response of /retrieve_memory, /v1/search or
    GET /v1/memories; the seed endpoint does not say whose a memory is (None)."""
    if path == "/retrieve_memory":
        return [(hit["content"], None) for hit in payload["memories"]]
    records = [hit["memory"] for hit in payload] if path == "/v1/search" else payload
    return [(record["content"], record.get("user_id")) for record in records]


class Probe:
    """One tenant's client in the cross-tenant check: what it found that it must not see."""

    def __init__(self, url: str, tenant: str, key: str) -> None:
        self.tenant, self.them = tenant, other(tenant)
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        self.leaks: list[dict[str, Any]] = []
        self.probes = 0

    def search(self, path: str, body: dict[str, Any]) -> int:
        """Search; every hit not the tenant's own is a leak. Returns the number of hits."""
        self.probes += 1
        response = self.http.post(path, json=body)
        response.raise_for_status()
        hits = hits_of(path, response.json())
        self.leaks += [{"probe": path, "body": body, "content": c} for c in foreign(hits, self.tenant)]
        return len(hits)

    def listed(self) -> set[str]:
        """The ids GET /v1/memories lists, page by page; a memory not the tenant's is a leak."""
        ids: set[str] = set()
        while True:
            self.probes += 1
            response = self.http.get("/v1/memories", params={"limit": 500, "offset": len(ids)})
            response.raise_for_status()
            page = response.json()
            if not page:
                return ids
            hits = hits_of("/v1/memories", page)
            self.leaks += [{"probe": "GET /v1/memories", "content": c} for c in foreign(hits, self.tenant)]
            ids |= {record["id"] for record in page}

    def refused(self, method: str, path: str, **options: Any) -> None:
        """A request that reaches the other tenant: a 2xx is a leak, but for an empty list (a
        history has no events of the caller's scope under another's id)."""
        self.probes += 1
        response = self.http.request(method, path, **options)
        if response.is_success and response.json() != []:
            self.leaks.append({"probe": f"{method} {path}", "status": response.status_code})


def cross_tenant_check(url: str, keys: dict[str, str], ids: dict[str, list[str]], corpus: dict) -> dict:
    """Each tenant looks for the other's memories every way it can: searches for the other's
    marker and questions, its own listing, the other's user_id named on each route, the other's
    ids read and forgotten. Also: the control (its own marker finds its memories) and the
    acknowledged stores missing from its listing (lost)."""
    probes = {tenant: Probe(url, tenant, key) for tenant, key in keys.items()}
    control, lost = {}, {}
    try:
        for tenant, probe in probes.items():
            for query in [TENANTS[probe.them], *corpus["questions"][probe.them][:10]]:
                probe.search("/retrieve_memory", {"query": query, "top_k": 50})
                for recipe in RECIPES:
                    probe.search("/v1/search", {"query": query, "k": 50, "recipe": recipe})
            control[tenant] = probe.search(
                "/v1/search", {"query": TENANTS[tenant], "k": 50, "recipe": "keyword"}
            )
            lost[tenant] = len(set(ids[tenant]) - probe.listed())
        for probe in probes.values():  # after every listing: a forget that got through shows as a leak only
            named = {"user_id": probe.them}
            probe.refused("POST", "/store_memory", json={"content": "probe", "metadata": named})
            probe.refused("POST", "/retrieve_memory", json={"query": TENANTS[probe.them], "metadata": named})
            probe.refused("POST", "/v1/search", json={"query": TENANTS[probe.them], **named})
            probe.refused("POST", "/v1/memories", json={"messages": "probe", "infer": False, **named})
            probe.refused("GET", "/v1/memories", params=named)
            for memory_id in ids[probe.them][:10]:
                probe.refused("GET", f"/v1/memories/{memory_id}")
                probe.refused("GET", f"/v1/memories/{memory_id}/history")
                probe.refused("POST", "/forget_memory", json={"memory_id": memory_id})
    finally:
        for probe in probes.values():
            probe.http.close()
    return {
        "leaks": [{"tenant": t, **leak} for t, probe in probes.items() for leak in probe.leaks],
        "probes": sum(probe.probes for probe in probes.values()),
        "own_marker_hits": control,
        "lost": lost,
    }
