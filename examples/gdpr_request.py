"""A data-subject request, end to end: give Ada everything held about her (access and
portability), then erase it, with a receipt that proves the erasure and holds none of her data.

    python examples/gdpr_request.py [--embedder test]

Runs offline with the local MiniLM model (or the deterministic test embedder). docs/governance.md
explains each step.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from dspy_memory import Memory


def main(embedder: str | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with Memory(folder / "service.db", embedder=embedder, actor="support-app") as memory:
            memory.add("I live in Lisbon and work as a nurse.", user_id="ada", at="2024-05-10")
            memory.add("I moved to Porto last week.", user_id="ada", at="2024-06-01")
            memory.add("I play chess on Sundays.", user_id="bob")
            ada = memory.scoped(user_id="ada")  # every call below reaches Ada's data only

            # Access and portability (GDPR articles 15 and 20): every memory and every version,
            # where each came from, its history, in one checked file another store can import.
            export = ada.export(folder / "ada.jsonl.gz")
            print("exported for Ada:", export.counts)

            # Erasure (article 17), logged under the request's id; backups taken before it still
            # hold her data and must be re-made or expired (docs/governance.md, "Backups").
            with memory.acting_as("privacy-desk", request_id="DSR-2024-017"):
                erased = ada.delete_scope()
            receipt = ada.audit(operation="erase_scope")[0]
            print(
                f"erased {erased.total} rows; receipt #{receipt.id} by {receipt.actor} for {receipt.request_id}:"
            )
            print("  ", receipt.counts, "scope as salted hash", receipt.user_hash[:16], "...")
            chain = memory.verify_audit()
            print("audit chain intact:", chain.ok, f"({chain.entries} entries)")
            left = ada.get_all()
            bob = memory.search("chess", user_id="bob")[0].content
        stored = b"".join(path.read_bytes() for path in folder.glob("service.db*"))
        return {
            "export_counts": export.counts,
            "receipt": receipt,
            "chain_ok": chain.ok,
            "left_for_ada": left,
            "bob": bob,
            "porto_in_file": b"Porto" in stored,
        }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default=None, help='e.g. "test"; default: the local MiniLM model')
    main(parser.parse_args().embedder)
