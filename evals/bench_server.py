"""The memory service under load: a real uvicorn on 127.0.0.1, two tenants, mixed traffic.

    python -m evals.bench_server [--seconds 30] [--clients 16] [--embedder local]

`dspy-memory keys create` makes one API key per tenant (tenant-a, tenant-b) in a fresh file, and
`dspy-memory serve --rate 0` serves it in a process of its own (the load generator does not
share the server's GIL). Each tenant is seeded with --seed-memories memories (POST /v1/memories,
no LM), then --clients threads, half per tenant, each with its own keep-alive httpx.Client, send
a mix (--mix) of POST /store_memory, /retrieve_memory and /v1/search for --seconds and stop by
themselves: each finishes the request it is in (--timeout bounds it). Every store is a new
text and every query a question no client sent before (the server's embedding cache serves no
repeats): the seeded memories' questions, both tenants' alike, and the stored texts'.

Every memory of a tenant carries its marker word, so every hit of every response is checked: a
hit without the caller's marker, with the other's, or of another user is a leak. At the end a
cross-tenant check searches each tenant for the other's marker and questions (every endpoint,
dense, keyword and hybrid), reads, and forgets the other's memories by id, and names the
other's user_id on every route: any such hit or 2xx is a leak; searching for the tenant's own
marker must find its memories (the control). Reported: requests, req/s, p50/p99 per endpoint,
errors (non-2xx or exceptions), leaks, the server's CPU, and, as the ceiling, the embedder's own
texts/s on the same kind of texts (in a process like the server's, before it starts: in batches
of as many texts as the clients can have in flight, and one at a time), with the service's
req/s as a share of it (every request embeds one text). Exit status 1 unless errors, leaks and
acknowledged stores missing from their tenant's listing are 0. docs/benchmarks.md ("Memory
service under load") has a run.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from evals.report import RESULTS_DIR, command_line, machine, percentile, save, stage, table
from evals.served import (
    ROOT,
    TENANTS,
    code_in_use,
    cpu_seconds,
    create_keys,
    embed_ceiling,
    machine_busy_seconds,
    serving,
)
from evals.synthetic import generate
from evals.tenant_leaks import cross_tenant_check, foreign, hits_of

ENDPOINTS = ("/store_memory", "/retrieve_memory", "/v1/search")


@dataclass
class Client:
    """One simulated client: a tenant's key, its own connection, what it saw."""

    index: int
    tenant: str
    latencies: dict[str, list[float]] = field(default_factory=lambda: {path: [] for path in ENDPOINTS})
    requests: Counter = field(default_factory=Counter)
    errors: list[dict[str, Any]] = field(default_factory=list)
    leaks: list[dict[str, Any]] = field(default_factory=list)
    hits_checked: int = 0
    stored: list[str] = field(default_factory=list)  # memory ids it stored
    finished: float = 0.0


def request_for(path: str, client: Client, corpus: dict[str, Any], n: int, clients: int) -> dict:
    """The n-th request of a client: a store of a new text carrying its tenant's marker, or a
    query no client has sent yet (the server's embedding cache does not serve repeats)."""
    if path == "/store_memory":
        text = corpus["fresh"][(client.index * 7919 + n) % len(corpus["fresh"])]
        return {"content": f"{text} Filed under {TENANTS[client.tenant]} note {client.index}.{n}."}
    question = corpus["queries"][(n * clients + client.index) % len(corpus["queries"])]
    if path == "/retrieve_memory":
        return {"query": question, "top_k": 5}
    return {"query": question, "k": 10}


def drive(client: Client, url: str, key: str, until: float, args: argparse.Namespace, corpus: dict) -> None:
    """Send the mix until `until` (monotonic), then finish the request in flight."""
    rng = random.Random(args.seed * 1000 + client.index)
    weights = [float(w) for w in args.mix.split(",")]
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=args.timeout) as http:
        n = 0
        while time.monotonic() < until:
            path = rng.choices(ENDPOINTS, weights)[0]
            body = request_for(path, client, corpus, n, args.clients)
            n += 1
            client.requests[path] += 1
            start = time.perf_counter()
            try:
                response = http.post(path, json=body)
            except httpx.HTTPError as exc:
                client.errors.append({"endpoint": path, "error": f"{type(exc).__name__}: {exc}"[:300]})
                continue
            elapsed = (time.perf_counter() - start) * 1000
            if not response.is_success:
                client.errors.append(
                    {"endpoint": path, "status": response.status_code, "body": response.text[:300]}
                )
                continue
            client.latencies[path].append(elapsed)
            if path == "/store_memory":
                client.stored.append(response.json()["memory_id"])
                continue
            hits = hits_of(path, response.json())
            client.hits_checked += len(hits)
            for content in foreign(hits, client.tenant):
                client.leaks.append({"endpoint": path, "tenant": client.tenant, "content": content})
    client.finished = time.monotonic()


def seed(url: str, keys: dict[str, str], corpus: dict[str, Any], timeout: float) -> dict[str, list[str]]:
    """Each tenant's seed memories, 50 a request (POST /v1/memories, infer off); their ids."""
    ids: dict[str, list[str]] = {}
    for tenant, key in keys.items():
        ids[tenant] = []
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout) as http:
            texts = corpus["seed"][tenant]
            for offset in range(0, len(texts), 50):
                body = {"messages": texts[offset : offset + 50], "infer": False}
                response = http.post("/v1/memories", json=body)
                response.raise_for_status()
                ids[tenant] += [record["id"] for record in response.json()["memories"]]
    return ids


def build_corpus(args: argparse.Namespace) -> dict[str, Any]:
    """Seed texts and their questions per tenant (disjoint), texts for the stores under load, and
    the queries: every distinct question, shuffled; the seeded ones are both tenants' (a broken
    scope would rank the other's memory first), the rest ask about what the stores add."""
    n = args.seed_memories
    items = generate(2 * n + 10_000, seed=args.seed)
    corpus: dict[str, Any] = {"seed": {}, "questions": {}, "fresh": [item.text for item in items[2 * n :]]}
    for index, (tenant, marker) in enumerate(TENANTS.items()):
        mine = items[index * n : (index + 1) * n]
        corpus["seed"][tenant] = [f"{item.text} Filed under {marker}." for item in mine]
        corpus["questions"][tenant] = [item.question for item in mine]
    corpus["queries"] = list(dict.fromkeys(item.question for item in items))
    random.Random(args.seed).shuffle(corpus["queries"])
    return corpus


def load(url: str, keys: dict[str, str], args: argparse.Namespace, corpus: dict, pid: int) -> dict[str, Any]:
    """--clients threads for --seconds; the per-endpoint numbers, errors and leaks."""
    tenants = list(TENANTS)
    clients = [Client(index, tenants[index % 2]) for index in range(args.clients)]
    server_cpu, own_cpu, busy = cpu_seconds(pid), time.process_time(), machine_busy_seconds()
    start = time.monotonic()
    until = start + args.seconds
    threads = [
        threading.Thread(target=drive, args=(c, url, keys[c.tenant], until, args, corpus), daemon=True)
        for c in clients
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.1, until + args.timeout + 5 - time.monotonic()))
    stuck = sum(thread.is_alive() for thread in threads)
    window = max(c.finished for c in clients) - start if not stuck else time.monotonic() - start
    server_used, busy_after = cpu_seconds(pid), machine_busy_seconds()
    endpoints = {}
    for path in ENDPOINTS:
        latencies = [ms for c in clients for ms in c.latencies[path]]
        requests = sum(c.requests[path] for c in clients)
        endpoints[path] = {
            "requests": requests,
            "ok": len(latencies),
            "per_s": requests / window,
            "p50_ms": percentile(latencies, 50),
            "p99_ms": percentile(latencies, 99),
            "errors": sum(e["endpoint"] == path for c in clients for e in c.errors),
        }
    errors = [e for c in clients for e in c.errors]
    return {
        "window_s": window,
        "endpoints": endpoints,
        "requests": sum(e["requests"] for e in endpoints.values()),
        "per_s": sum(e["requests"] for e in endpoints.values()) / window,
        "errors": len(errors) + stuck,
        "error_samples": errors[:20] + ([{"error": f"{stuck} clients still running"}] if stuck else []),
        "error_kinds": dict(Counter(str(e.get("status") or e["error"].split(":")[0]) for e in errors)),
        "leaks": [leak for c in clients for leak in c.leaks],
        "hits_checked": sum(c.hits_checked for c in clients),
        "requests_per_tenant": {
            t: sum(sum(c.requests.values()) for c in clients if c.tenant == t) for t in TENANTS
        },
        "stored": {t: [i for c in clients if c.tenant == t for i in c.stored] for t in TENANTS},
        "server_cpu_cores": (server_used - server_cpu) / window if server_cpu is not None else None,
        "client_cpu_cores": (time.process_time() - own_cpu) / window,
        # Everything else the machine ran meanwhile (other people's tests on a shared machine).
        "other_cpu_cores": (busy_after - busy - (server_used - server_cpu)) / window
        - (time.process_time() - own_cpu) / window
        if busy is not None and server_cpu is not None
        else None,
        "load_average": os.getloadavg(),
    }


def ceiling_texts(
    args: argparse.Namespace, corpus: dict[str, Any], count: int = 1000
) -> list[tuple[str, str]]:
    """The texts the clients' requests embed, in the mix's proportions: a store embeds its
    content, a retrieve or a search its query (one text a request)."""
    rng = random.Random(args.seed)
    weights = [float(w) for w in args.mix.split(",")]
    texts = []
    for n in range(count):
        client = Client(n % args.clients, list(TENANTS)[n % 2])
        path = rng.choices(ENDPOINTS, weights)[0]
        body = request_for(path, client, corpus, n // args.clients, args.clients)
        texts.append(("document", body["content"]) if "content" in body else ("query", body["query"]))
    return texts


def ceilings(args: argparse.Namespace, corpus: dict[str, Any]) -> dict[str, Any]:
    """The embedder's own texts/s on the clients' kind of texts, in a process like the server's:
    one at a time, and in batches of as many texts as can be in flight (one a client, up to the
    server's embed_batch_size), the most the server's batches can hold."""
    from dspy_memory.config import MemoryConfig

    batch = min(args.clients, MemoryConfig.model_fields["embed_batch_size"].default)
    texts = ceiling_texts(args, corpus)
    return {
        "batched": embed_ceiling(args.embedder, texts, batch, args.ceiling_seconds, args.code),
        "alone": embed_ceiling(args.embedder, texts, 1, args.ceiling_seconds, args.code),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-server-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = build_corpus(args)
    stage(f"the embedder's ceiling: {args.embedder} alone, in a process like the server's")
    ceiling = ceilings(args, corpus)
    stage(f"keys for {', '.join(TENANTS)} in {work / 'bench.db'} (embedder {args.embedder})")
    keys = create_keys(work / "bench.db", args.embedder, args.code)
    stage("starting dspy-memory serve")
    with serving(work, args) as (url, process):
        stage(f"serving at {url} (pid {process.pid}); seeding {args.seed_memories} memories per tenant")
        ids = seed(url, keys, corpus, args.timeout)
        stage(f"{args.clients} clients for {args.seconds:g} s")
        results = load(url, keys, args, corpus, process.pid)
        stage("cross-tenant check")
        for tenant in TENANTS:
            ids[tenant] += results["stored"][tenant]
        check = cross_tenant_check(url, keys, ids, corpus)
        server = {"pid": process.pid, "url": url, "code": code_in_use(args.code)}
    server["returncode"] = process.returncode
    results.pop("stored")
    results.update(
        machine=machine(),
        settings={k: v for k, v in vars(args).items() if k not in ("out", "plot")},
        server=server,
        memories={t: len(v) for t, v in ids.items()},
        leaks_during_load=len(results.pop("leaks")),
        cross_tenant=check,
        leaks_cross_tenant=len(check["leaks"]),
    )
    results["embedder_ceiling"] = ceiling
    results["share_of_ceiling"] = results["per_s"] / ceiling["batched"]["texts_per_s"]
    results["leaks"] = results["leaks_during_load"] + results["leaks_cross_tenant"]
    results["lost"] = sum(check["lost"].values())
    vacuous = not all(check["own_marker_hits"].values())
    results["ok"] = results["errors"] == 0 and results["leaks"] == 0 and results["lost"] == 0 and not vacuous
    if results["ok"] and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        results["workdir"] = str(work)
    return results


def report(r: dict[str, Any]) -> str:
    rows = [
        [
            f"POST {path}",
            e["requests"],
            f"{e['per_s']:.1f}",
            f"{e['p50_ms']:.1f}",
            f"{e['p99_ms']:.1f}",
            e["errors"],
        ]
        for path, e in r["endpoints"].items()
    ]
    rows.append(["all", r["requests"], f"{r['per_s']:.1f}", "", "", r["errors"]])
    check = r["cross_tenant"]
    cpu = r["server_cpu_cores"]
    lines = [
        table(["endpoint", "requests", "req/s", "p50 ms", "p99 ms", "errors"], rows),
        "",
        f"errors: {r['errors']} ({', '.join(f'{k} x{v}' for k, v in r['error_kinds'].items()) or 'none'})",
        f"leaks during load: {r['leaks_during_load']} ({r['hits_checked']} hits checked)",
        f"cross-tenant check: {r['leaks_cross_tenant']} leaks in {check['probes']} probes "
        f"(control, own marker found: {', '.join(f'{t} {n}' for t, n in check['own_marker_hits'].items())})",
        f"acknowledged memories missing from their tenant's listing: {r['lost']} "
        f"(of {', '.join(f'{t} {n}' for t, n in r['memories'].items())})",
        f"CPU during the load: server {'n/a' if cpu is None else f'{cpu:.2f}'} cores, "
        f"load generator {r['client_cpu_cores']:.2f} cores, other processes "
        f"{'n/a' if r['other_cpu_cores'] is None else format(r['other_cpu_cores'], '.2f')} cores "
        f"(of {r['machine']['cpus']}; load average {r['load_average'][0]:.2f})",
        ceiling_line(r),
    ]
    return "\n".join(lines)


def ceiling_line(r: dict[str, Any]) -> str:
    batched, alone = r["embedder_ceiling"]["batched"], r["embedder_ceiling"]["alone"]
    return (
        f"the embedder's ceiling (on its own, in a process like the server's): {batched['texts_per_s']:.1f} "
        f"texts/s in batches of {batched['batch']} ({batched['cpu_cores']:.2f} cores), "
        f"{alone['texts_per_s']:.1f} texts/s one at a time; the service, one text a request: "
        f"{r['per_s']:.1f} req/s = {r['share_of_ceiling']:.0%} of the ceiling"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the clients send")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients, half per tenant")
    parser.add_argument("--embedder", default="local", help="embedder spec of the server (test: hash, fast)")
    parser.add_argument("--seed-memories", type=int, default=200, help="memories per tenant before the load")
    parser.add_argument("--mix", default="30,40,30", help="weights of store,retrieve,search")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds a request may take")
    parser.add_argument(
        "--start-timeout", type=float, default=120.0, help="seconds the server may take to start"
    )
    parser.add_argument(
        "--ceiling-seconds",
        type=float,
        default=10.0,
        help="seconds to measure the embedder alone, per batch size",
    )
    parser.add_argument(
        "--code",
        type=Path,
        default=ROOT,
        help="the checkout whose dspy_memory the server runs (default: this one)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default=None, help="the memory file and server log go here")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (always kept on failure)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "bench_server.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "bench_server.png"))
    args = parser.parse_args(argv)
    if args.clients < 2:
        parser.error("--clients must be at least 2 (one per tenant)")
    results = run(args)
    shown = "\n\n".join(
        [
            f"Memory service under load: {args.clients} clients, 2 tenants, {results['window_s']:.1f} s, "
            f"embedder {args.embedder}, mix store/retrieve/search {args.mix}, server code "
            f"{results['server']['code']}",
            report(results),
            "OK: no errors, no leaks, nothing lost"
            if results["ok"]
            else f"FAILED (file and server log kept in {results['workdir']})",
        ]
    )
    print(shown)
    endpoints = list(results["endpoints"])
    save(
        results,
        out=args.out,
        plot=args.plot,
        groups=endpoints,
        series={
            "p50 ms": [results["endpoints"][p]["p50_ms"] for p in endpoints],
            "p99 ms": [results["endpoints"][p]["p99_ms"] for p in endpoints],
        },
        title=f"Latency under load ({args.clients} clients, {args.embedder} embedder): "
        f"{results['per_s']:.0f} req/s, {results['share_of_ceiling']:.0%} of the embedder's "
        f"{results['embedder_ceiling']['batched']['texts_per_s']:.0f} texts/s",
        ylabel="ms",
        text=shown,
        command=command_line("evals.bench_server", argv),
    )
    return results


if __name__ == "__main__":
    sys.exit(0 if main().get("ok") else 1)
