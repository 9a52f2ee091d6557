"""Print the wheel index to install torch from, or nothing for pip's configured one.

Only the `sentence-transformers` extra needs torch (the default local embedder runs in numpy).
On Linux, PyPI's torch is the CUDA build: it depends on gigabytes of nvidia-* wheels. So on a
Linux machine without an NVIDIA driver, ask pip what it would install (a dry run reads only
metadata) and, when that includes nvidia-* packages, print PyTorch's CPU-only index. A machine
whose pip is configured with a mirror that serves the CPU build resolves no nvidia-* packages
and keeps its mirror. $TORCH_INDEX_URL overrides everything.

    python scripts/torch_index.py --pip .venv/bin/pip [--version 2.13.0]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def has_nvidia_driver() -> bool:
    return shutil.which("nvidia-smi") is not None or Path("/proc/driver/nvidia/version").exists()


def pulls_cuda(report: dict) -> bool:
    """Whether a `pip install --report` would install CUDA libraries."""
    names = [str(item.get("metadata", {}).get("name", "")).lower() for item in report.get("install", [])]
    return any(name.startswith("nvidia-") for name in names)


def choose_index(
    *, override: str | None, platform: str, nvidia: bool, dry_run: Callable[[], dict | None]
) -> str | None:
    """The index URL to pass to pip for torch, or None to use pip's configuration."""
    if override:
        return override
    if platform != "linux" or nvidia:
        return None  # macOS and Windows wheels on PyPI are CPU builds; a GPU machine wants CUDA
    report = dry_run()
    return CPU_INDEX if report is not None and pulls_cuda(report) else None


def pip_dry_run(pip: str, requirement: str) -> dict | None:
    done = subprocess.run(
        [pip, "install", "--dry-run", "--quiet", "--ignore-installed", "--report", "-", requirement],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        print(f"pip could not resolve {requirement} ({done.stderr.strip()[-300:]})", file=sys.stderr)
        return None
    try:
        return json.loads(done.stdout)
    except ValueError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pip", default="pip", help="the pip of the environment torch goes into")
    parser.add_argument("--version", default="2.13.0", help="the torch version (default 2.13.0)")
    args = parser.parse_args(argv)
    index = choose_index(
        override=os.environ.get("TORCH_INDEX_URL"),
        platform=sys.platform,
        nvidia=has_nvidia_driver(),
        dry_run=lambda: pip_dry_run(args.pip, f"torch=={args.version}"),
    )
    if index:
        print(index)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
