"""Tiny models that already answer in the right form: real training in seconds, for tests.

:func:`concord.models.build_tiny_model` gives a random Llama with SmolLM2's 49k-token
vocabulary, which never produces a ``\\boxed{}`` answer or a program (so every consensus reward
is 0) and whose vocabulary-sized soft-max dominates CPU time. The models here have a small
byte-level BPE vocabulary trained on the prompts they will see, a ChatML template, and are
fine-tuned for a few dozen steps to reply in one of a few disagreeing ways, so majority, EC,
CISC, CoRE (:func:`build_boxed_tiny_model`: ``The answer is \\boxed{d}.``) and the FMV arms
(:func:`build_code_tiny_model`: a program printing ``d``) all produce non-trivial rewards.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Callable, Sequence

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
Messages = list[dict[str, str]]
#: Positions of every tiny model: the schema's default budgets (prompt 1,024 + completion 3,072,
#: TTRL's) fit, so a job's vLLM context never exceeds the model's (RoPE: no parameter depends on it).
TINY_MAX_POSITIONS = 4096
#: Attention heads x head size = hidden size 64. vLLM's CPU attention supports head sizes 32, 64,
#: 80, ... (not 16), so two heads of 32 (one shared key/value head), and vLLM can run every tiny model.
TINY_HEADS, TINY_KV_HEADS = 2, 1


def arithmetic_prompt(rng: random.Random) -> str:
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    return f"What is {a} + {b}?"


def build_boxed_tiny_model(
    out_dir: str | os.PathLike,
    *,
    answers: Sequence[str] = ("1", "2", "3"),
    steps: int = 80,
    seed: int = 0,
    prompt_style: str = "instruct",
) -> Path:
    """Replies ``The answer is \\boxed{d}.``, d drawn from ``answers``; saved to ``out_dir``
    (atomically) in a few seconds."""
    from concord.data import build_messages

    rng = random.Random(seed)
    corpus = [
        build_messages(arithmetic_prompt(rng), prompt_style)[0]["content"] + f" The answer is \\boxed{{{d}}}."
        for _ in range(100) for d in "0123456789"
    ]
    return _train_tiny(
        out_dir, corpus=corpus, vocab_size=300, max_positions=TINY_MAX_POSITIONS, steps=steps, seed=seed, rng=rng,
        conversation=lambda r: build_messages(arithmetic_prompt(r), prompt_style),
        reply=lambda r: f"The answer is \\boxed{{{r.choice(list(answers))}}}.",
    )


def build_code_tiny_model(
    out_dir: str | os.PathLike,
    conversations: Sequence[Messages],
    *,
    outputs: Sequence[str] = ("1", "2", "3"),
    steps: int = 80,
    seed: int = 0,
) -> Path:
    """Replies to the given code-generation ``conversations`` with a fenced Python program that
    prints ``d``, d drawn from ``outputs``: the programs' outputs disagree, so FMV's vote has
    clusters to choose from."""
    rng = random.Random(seed)
    replies = [f"```python\nprint({d})\n```" for d in outputs]
    corpus = [m["content"] for c in conversations for m in c] + replies
    return _train_tiny(
        out_dir, corpus=corpus, vocab_size=600, max_positions=TINY_MAX_POSITIONS, steps=steps, seed=seed, rng=rng,
        conversation=lambda r: r.choice(list(conversations)), reply=lambda r: r.choice(replies),
    )


def _train_tiny(out_dir: str | os.PathLike, *, corpus: Sequence[str], vocab_size: int, max_positions: int, steps: int,
                seed: int, rng: random.Random, conversation: Callable[[random.Random], Messages],
                reply: Callable[[random.Random], str]) -> Path:
    """Train a byte-level BPE on ``corpus`` and a 2-layer Llama to answer ``conversation(rng)``
    with ``reply(rng)`` (loss on the reply only); save both to ``out_dir`` atomically."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from concord.io import atomic_path

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus, vocab_size=vocab_size, min_frequency=1,
                            special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], show_progress=False)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", chat_template=CHATML)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=TINY_HEADS,
        num_key_value_heads=TINY_KV_HEADS, max_position_embeddings=max_positions, tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
    )
    model = LlamaForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    for _ in range(steps):
        batch = []
        for _ in range(16):
            prompt = tok.apply_chat_template(conversation(rng), tokenize=False, add_generation_prompt=True)
            answer = f"{reply(rng)}{tok.eos_token}"
            p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
            batch.append((len(p_ids), p_ids + tok(answer, add_special_tokens=False)["input_ids"]))
        width = max(len(ids) for _, ids in batch)
        ids = torch.full((len(batch), width), tok.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (n_prompt, seq) in enumerate(batch):
            ids[i, :len(seq)] = torch.tensor(seq)
            mask[i, :len(seq)] = 1
            labels[i, n_prompt:len(seq)] = torch.tensor(seq[n_prompt:])  # learn the reply only
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    out_dir = Path(out_dir)
    with atomic_path(out_dir, suffix="") as tmp:
        tmp.unlink()
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
    return out_dir
