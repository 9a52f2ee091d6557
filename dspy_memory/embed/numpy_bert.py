"""A BERT sentence encoder in numpy: the forward pass of a sentence-transformers model folder
(BertModel + mean pooling + normalize, e.g. all-MiniLM-L6-v2) without torch.

Why: importing sentence-transformers and torch costs 6-8 s on an idle 2-core machine (33-55 s
under load), on every CLI command that embeds, and torch makes the install gigabytes. The
forward pass of a 6-layer, 384-wide BERT is a few matrix products; numpy does it in
milliseconds, `tokenizers` reads the model's own tokenizer.json and `safetensors` its weights.
Vectors match sentence-transformers' to cosine >= 0.9999 (tests/test_numpy_bert.py checks
stored reference vectors; `python -m evals.embed_parity` checks 1,000 LoCoMo turns).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

MODULE_TRANSFORMER = "sentence_transformers.models.Transformer"
MODULE_POOLING = "sentence_transformers.models.Pooling"
MODULE_NORMALIZE = "sentence_transformers.models.Normalize"
FEED_FORWARD_ROWS = 128


def unsupported_reason(folder: Path) -> str | None:
    """Why `folder` cannot run here (None when it can): it must be a sentence-transformers
    folder of a BERT model with absolute positions, GELU, mean pooling and safetensors weights."""
    try:
        modules = [m["type"] for m in json.loads((folder / "modules.json").read_text())]
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"not a sentence-transformers folder ({exc})"
    if modules[:2] != [MODULE_TRANSFORMER, MODULE_POOLING] or set(modules[2:]) - {MODULE_NORMALIZE}:
        return f"modules {modules} are not Transformer + Pooling (+ Normalize)"
    if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
        return (
            f"model_type {config.get('model_type')!r} with {config.get('hidden_act')!r} is not BERT with GELU"
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        return "relative position embeddings are not supported"
    pooling_files = sorted(folder.glob("1_*/config.json"))
    pooling = json.loads(pooling_files[0].read_text()) if pooling_files else {}
    mean_only = {key for key, on in pooling.items() if key.startswith("pooling_mode") and on} == {
        "pooling_mode_mean_tokens"
    }
    if not mean_only:
        return "pooling is not mean pooling"
    for name in ("model.safetensors", "tokenizer.json"):
        if not (folder / name).is_file():
            return f"{name} is missing"
    return None


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * (1 + erf(x / sqrt 2)) / 2 (the tanh form moves vectors by ~1e-4).
    numpy has no erf: Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7, under float32's
    resolution here), computed in place because temporaries of (tokens x 1536) dominate."""
    z = x * np.float32(0.7071067811865476)
    sign = np.sign(z)
    a = np.abs(z, out=z)
    t = a * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(coefficient)
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a  # poly is now 1 - erf(|z|)
    np.subtract(1.0, poly, out=poly)
    poly *= sign  # erf(z)
    poly += 1.0
    poly *= x
    poly *= 0.5
    return poly


class NumpyBertEncoder:
    """Mean-pooled, L2-normalized sentence vectors from a sentence-transformers BERT folder."""

    def __init__(self, folder: str | Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        folder = Path(folder)
        reason = unsupported_reason(folder)
        if reason is not None:
            raise ValueError(f"{folder} cannot run without torch: {reason}")
        config = json.loads((folder / "config.json").read_text())
        settings_file = folder / "sentence_bert_config.json"
        settings = json.loads(settings_file.read_text()) if settings_file.is_file() else {}
        self.max_length = int(settings.get("max_seq_length") or config["max_position_embeddings"])
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dim = int(config["hidden_size"])
        weights = load_file(str(folder / "model.safetensors"))
        # Checkpoints name their tensors with or without the "bert." prefix.
        self._w = {name.removeprefix("bert."): value for name, value in weights.items()}
        # Pre-transpose the dense layers once: x @ W.T on every call would copy each time.
        for name in list(self._w):
            if name.endswith(".weight") and self._w[name].ndim == 2 and ".embeddings." not in f".{name}":
                self._w[name] = np.ascontiguousarray(self._w[name].T)
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_length)
        self.tokenizer.no_padding()

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """One normalized float32 vector per text, `batch_size` texts a forward pass (by
        length, so a pass's attention pads little)."""
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda index: len(encodings[index].ids))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            out[chunk] = self._forward([encodings[index].ids for index in chunk])
        return out

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        # One 2-D product: numpy runs (batch, width, d) @ (d, n) as `batch` small ones.
        weight = self._w[f"{name}.weight"]
        out = x.reshape(-1, x.shape[-1]) @ weight
        out += self._w[f"{name}.bias"]
        return out.reshape(*x.shape[:-1], weight.shape[1])

    def _feed_forward(self, x: np.ndarray, prefix: str) -> np.ndarray:
        # In blocks of rows, so the (rows x 1536) intermediate stays in cache through the GELU:
        # one pass over the whole batch's intermediate is memory-bound and twice as slow.
        rows = x.reshape(-1, x.shape[-1])
        out = np.empty_like(rows)
        for start in range(0, len(rows), FEED_FORWARD_ROWS):
            block = rows[start : start + FEED_FORWARD_ROWS]
            hidden = _gelu(self._dense(block, f"{prefix}.intermediate.dense"))
            out[start : start + FEED_FORWARD_ROWS] = self._dense(hidden, f"{prefix}.output.dense")
        return out.reshape(x.shape)

    def _forward(self, token_ids: list[list[int]]) -> np.ndarray:
        """The texts' vectors. Tokens are packed, one row each, with no padding: every layer
        but attention works token by token, and padding short texts to the longest one made
        a batch of the service's mixed texts (queries ~11 tokens, stored notes ~25) cost 1.8x
        its real tokens. Attention alone runs padded, (texts x longest x longest) per head,
        a small share of the work for sentences."""
        w = self._w
        lengths = np.fromiter(map(len, token_ids), dtype=np.int64, count=len(token_ids))
        batch, width = len(token_ids), int(lengths.max())
        text_of = np.repeat(np.arange(batch), lengths)  # each token's text and position in it
        starts = np.cumsum(lengths) - lengths
        position = np.arange(len(text_of)) - np.repeat(starts, lengths)
        ids = np.fromiter((i for tokens in token_ids for i in tokens), dtype=np.int64, count=len(text_of))
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][position]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        head_dim = self.dim // self.heads
        mask = np.zeros((batch, width), dtype=np.float32)
        mask[text_of, position] = 1.0
        # Padded keys get a large negative score, so softmax gives them no weight.
        key_bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(head_dim))

        def padded(t: np.ndarray) -> np.ndarray:  # (tokens, dim) -> (texts, heads, width, head_dim)
            out = np.zeros((batch, width, self.dim), dtype=np.float32)
            out[text_of, position] = t
            return out.reshape(batch, width, self.heads, head_dim).transpose(0, 2, 1, 3)

        for layer in range(self.layers):
            p = f"encoder.layer.{layer}"
            q = padded(self._dense(x, f"{p}.attention.self.query"))
            k = padded(self._dense(x, f"{p}.attention.self.key"))
            v = padded(self._dense(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) * scale + key_bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3)[text_of, position].reshape(-1, self.dim)
            x = _layer_norm(
                self._dense(context, f"{p}.attention.output.dense") + x,
                w[f"{p}.attention.output.LayerNorm.weight"],
                w[f"{p}.attention.output.LayerNorm.bias"],
                self.eps,
            )
            x = _layer_norm(
                self._feed_forward(x, p) + x,
                w[f"{p}.output.LayerNorm.weight"],
                w[f"{p}.output.LayerNorm.bias"],
                self.eps,
            )
        pooled = np.add.reduceat(x, starts, axis=0) / lengths[:, None].astype(np.float32)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
