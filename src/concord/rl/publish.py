"""The trained model as the declared output: the fp32 master weights the optimiser stepped,
without tied copies.

The weights are saved as they were trained, not cast to the compute dtype: a single update at the
paper's learning rate is below bf16's resolution, so a bf16 copy of a briefly trained policy can
equal the base model bit for bit while its master weights moved (what evaluation reads must be
what was trained). Evaluation engines cast to their own compute dtype on load (vLLM and HF round
to nearest, as a cast here would). The cost is disk: twice a bf16 copy, for as long as the
trained model lives (``temp()`` by default: until it is evaluated)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping


def cast_state_dict(state_dict: Mapping[str, Any], dtype: str) -> dict:
    """Floating-point tensors in ``dtype``, the others as they are (a gathered FSDP state dict is
    written in the master weights' dtype whatever its shards computed in)."""
    import torch

    target = getattr(torch, dtype)
    return {k: (v.to(target) if torch.is_floating_point(v) else v) for k, v in state_dict.items()}


def drop_tied_copies(state_dict: Mapping[str, Any], tied: Mapping[str, str]) -> dict:
    """Without the tied aliases (``{alias: source}``, e.g. ``lm_head.weight`` ->
    ``model.embed_tokens.weight``) that hold a copy of their source.

    A state dict gathered from FSDP shards holds tied weights as separate copies, which
    ``save_pretrained`` (it detects ties by shared storage) would write twice.
    """
    import torch

    out = dict(state_dict)
    for alias, source in tied.items():
        if alias in out and source in out and torch.equal(out[alias], out[source]):
            del out[alias]
    return out


def publish_model(trainer, tokenizer, dest: str | os.PathLike, dtype: str) -> None:
    """Write the trained policy (full weights in ``dtype``, the master weights' dtype; safetensors)
    and tokenizer to ``dest``.

    Collective under FSDP: every process must call it (the shards are gathered to the main one).
    """
    state_dict = trainer.accelerator.get_state_dict(trainer.model_wrapped)
    if trainer.accelerator.is_main_process:
        model = trainer.accelerator.unwrap_model(trainer.model_wrapped)
        tied = getattr(model, "all_tied_weights_keys", None) or getattr(model, "_tied_weights_keys", None) or {}
        state_dict = drop_tied_copies(cast_state_dict(state_dict, dtype), tied if isinstance(tied, Mapping) else {})
        model.save_pretrained(str(dest), state_dict=state_dict, safe_serialization=True)
        # The file holds `dtype`; the config says so, whatever dtype the live parameters report.
        config_path = Path(dest) / "config.json"
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config["dtype"] = dtype
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tokenizer.save_pretrained(str(dest))
    trainer.accelerator.wait_for_everyone()


__all__ = ["cast_state_dict", "drop_tied_copies", "publish_model"]
