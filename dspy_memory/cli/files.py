"""Commands on whole memory files (docs/cli.md): `backup`, `restore-backup`, `verify`, and
`encrypt`, `decrypt`, `rekey` (docs/governance.md).

Keys never come from a plain argument: a command line lands in shell history and in `ps` for
every user of the machine. The current key is read from $DSPY_MEMORY_ENCRYPTION_KEY (or the
variable --key-env names), a new key from the variable --new-key-env names; without one, an
interactive terminal is asked (without echo, a new key twice).
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

from dspy_memory.cli.commands import NOT_FOUND, USAGE, print_json

KEY_ENV = "DSPY_MEMORY_ENCRYPTION_KEY"


def add_file_commands(sub: Any) -> None:
    def command(
        name: str, help_text: str, func: Any, *, db: bool = True, keyed: bool = True
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func)
        if db:
            p.add_argument(
                "--db",
                default=os.environ.get("DSPY_MEMORY_PATH", "memory.db"),
                help="memory file (default: $DSPY_MEMORY_PATH or memory.db)",
            )
        p.add_argument("--json", action="store_true", help="print JSON")
        if not keyed:  # a plaintext file has no current key
            return p
        p.add_argument(
            "--key-env",
            default=KEY_ENV,
            metavar="NAME",
            help=f"environment variable holding the file's current key (default {KEY_ENV})",
        )
        return p

    p = command(
        "backup", "write a verified backup of the memory file (and a manifest next to it)", cmd_backup
    )
    p.add_argument("dest", help="the backup file to write (a new file; <dest>.manifest.json goes next to it)")
    p.add_argument("--overwrite", action="store_true", help="replace dest if it exists")

    p = command(
        "restore-backup",
        "replace the memory file with a backup, verified first (the file must not be open)",
        cmd_restore_backup,
    )
    p.add_argument("src", help="the backup file (checked against src.manifest.json when it exists)")

    p = command("verify", "check a memory file or backup (exit 1 if it fails)", cmd_verify, db=False)
    p.add_argument("file", help="the file to check (a backup is checked against its manifest)")

    command(
        "encrypt",
        "encrypt a plaintext memory file with a new key (the file must not be open)",
        cmd_encrypt,
        keyed=False,
    )
    command(
        "decrypt", "write an encrypted memory file back as plaintext (the file must not be open)", cmd_decrypt
    )
    command("rekey", "change the key of an encrypted memory file (the file must not be open)", cmd_rekey)
    for name in ("encrypt", "rekey"):
        sub.choices[name].add_argument(
            "--new-key-env",
            default=None,
            metavar="NAME",
            help="environment variable holding the new key (default: ask on the terminal, twice)",
        )


def _env_key(args: argparse.Namespace) -> str | None:
    return os.environ.get(args.key_env) or None


def _ask(prompt: str) -> str | None:
    if not sys.stdin.isatty():
        return None
    return getpass.getpass(prompt) or None


def current_key(args: argparse.Namespace, path: str, *, required: bool = False) -> str | None:
    """The file's current key: from the environment, else asked when the file looks encrypted
    (or `required`) and a terminal is there."""
    from dspy_memory.governance.files import looks_encrypted

    key = _env_key(args)
    if key is None and (required or looks_encrypted(path)):
        key = _ask(f"current key of {path}: ")
        if key is None and required:
            raise _no_key(f"the current key of {path}", args.key_env, "--key-env")
    return key


def new_key(args: argparse.Namespace) -> str:
    from dspy_memory.errors import EncryptionKeyError

    if args.new_key_env:
        key = os.environ.get(args.new_key_env)
        if not key:
            raise EncryptionKeyError(f"--new-key-env names ${args.new_key_env}, which is not set or empty")
        return key
    key = _ask("new key: ")
    if key is None:
        raise _no_key("a new key", "NAME", "--new-key-env")
    if _ask("new key again: ") != key:
        raise EncryptionKeyError("the two new keys differ; nothing was changed")
    return key


def _no_key(what: str, variable: str, flag: str) -> Exception:
    from dspy_memory.errors import EncryptionKeyError

    return EncryptionKeyError(
        f"{what} is needed: set it in an environment variable and name it with {flag} "
        f"(e.g. {flag} {variable}), or run on a terminal to be asked. Keys are never taken as "
        "arguments: those land in shell history and process lists."
    )


def _show(check: Any, *, as_json: bool, done: str) -> int:
    from dspy_memory.errors import VerificationError

    if isinstance(check, VerificationError):
        check, failed = check.check, str(check)
    else:
        failed = None
    if as_json:
        print_json({"ok": check.ok, **check.model_dump(mode="json")})
    elif check.ok:
        memories = check.tables.get("memories", 0)
        print(
            f"{done}: {check.path} (integrity ok, {memories} memory rows, indexes agree, schema {check.schema_version})"
        )
    if not check.ok:
        for problem in check.problems:
            print(f"  FAILED: {problem}", file=sys.stderr)
        if failed and not as_json:
            print("nothing was replaced", file=sys.stderr)
        return NOT_FOUND
    return 0


def cmd_backup(args: argparse.Namespace) -> int:
    from dspy_memory.memory import Memory

    with Memory(args.db, encryption_key=current_key(args, args.db)) as memory:
        manifest = memory.backup(args.dest, overwrite=args.overwrite)
    if args.json:
        print_json(manifest.model_dump(mode="json"))
        return 0
    memories = manifest.tables.get("memories", 0)
    encrypted = ", encrypted" if manifest.encrypted else ""
    print(
        f"backed up {args.db} to {args.dest} ({manifest.size} bytes{encrypted}, {memories} memory rows, "
        f"verified) in {manifest.duration_s:.2f} s; manifest: {args.dest}.manifest.json"
    )
    return 0


def cmd_restore_backup(args: argparse.Namespace) -> int:
    from dspy_memory.errors import VerificationError
    from dspy_memory.governance.backup import restore

    try:
        check = restore(args.src, args.db, encryption_key=current_key(args, args.src))
    except VerificationError as exc:
        return _show(exc, as_json=args.json, done="")
    return _show(check, as_json=args.json, done=f"restored {args.src} as")


def cmd_verify(args: argparse.Namespace) -> int:
    from dspy_memory.governance.backup import verify_file

    check = verify_file(args.file, encryption_key=current_key(args, args.file))
    return _show(check, as_json=args.json, done="ok")


def _change(args: argparse.Namespace, *, old: str | None, new: str | None, done: str) -> int:
    from dspy_memory.errors import VerificationError
    from dspy_memory.governance.rekey import change_key

    try:
        check = change_key(args.db, old_key=old, new_key=new)
    except VerificationError as exc:
        return _show(exc, as_json=args.json, done="")
    return _show(check, as_json=args.json, done=done)


def cmd_encrypt(args: argparse.Namespace) -> int:
    from dspy_memory.governance.files import looks_encrypted

    if looks_encrypted(args.db):
        print(
            f"dspy-memory encrypt: {args.db} is already encrypted; use rekey to change its key",
            file=sys.stderr,
        )
        return USAGE
    return _change(args, old=None, new=new_key(args), done="encrypted")


def cmd_decrypt(args: argparse.Namespace) -> int:
    return _change(args, old=current_key(args, args.db, required=True), new=None, done="decrypted")


def cmd_rekey(args: argparse.Namespace) -> int:
    old = current_key(args, args.db, required=True)
    return _change(args, old=old, new=new_key(args), done="re-keyed")
