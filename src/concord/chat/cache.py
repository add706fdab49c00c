"""The on-disk call cache: one JSON file per distinct call, keyed by the SHA-256 of (model,
messages, sampling parameters); a rerun issues no calls and returns identical completions."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from concord.chat.base import (
    REASONING_FIELDS,
    Chat,
    ChatError,
    Completion,
    Messages,
    as_completion,
    chat_model_name,
    complete_each,
    resolve_sampling,
    validate_messages,
)
from concord.io import write_json

def cache_key(model: str, messages: Messages, sampling: dict[str, Any]) -> str:
    """SHA-256 over model, messages and (resolved) sampling parameters, canonical JSON."""
    blob = json.dumps(
        {"model": model, "messages": messages, "sampling": {k: sampling[k] for k in sorted(sampling)}},
        sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=list,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachedChat:
    """Wrap a chat object with an on-disk cache: one JSON file per distinct call.

    Files live at ``cache_dir/<key[:2]>/<key>.json`` and are written atomically, so concurrent
    workers (threads or Snakemake jobs) sharing a cache never see a half-written entry. The model
    name is part of the key, so one directory can hold several models' calls.

    ``expect_reasoning``: the model is a reasoning model behind a server that should return its
    reasoning channel. Single replies without one are recorded as such (``reasoning_field`` null);
    but once ``reasoning_probe`` calls have come back and *none* carried reasoning, the server is
    evidently not parsing it and :class:`ChatError` says how to fix that (the calls stay cached).
    """

    def __init__(self, inner: Chat, cache_dir: str | os.PathLike, *, model_name: str | None = None,
                 defaults: dict[str, Any] | None = None, expect_reasoning: bool = False,
                 reasoning_probe: int = 4):
        self.inner = inner
        self.cache_dir = Path(cache_dir)
        self.model_name = model_name or chat_model_name(inner)
        self.defaults = dict(defaults or {})
        self.expect_reasoning = expect_reasoning
        self.reasoning_probe = max(1, int(reasoning_probe))
        self.hits = 0
        self.misses = 0
        self.failures = 0
        self.with_reasoning = 0
        self.seen = 0
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def _lookup(self, key: str) -> Completion | None:
        path = self._path(key)
        if not path.exists():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ChatError(f"corrupt cache entry {path}: {exc.msg}; delete it to recompute") from exc
        return replace(Completion.from_dict(entry["completion"]), cached=True)

    def _store(self, key: str, messages: Messages, sampling: dict, completion: Completion) -> None:
        write_json(self._path(key), {
            "model": self.model_name, "messages": messages,
            "sampling": {k: list(v) if isinstance(v, tuple) else v for k, v in sampling.items()},
            "completion": completion.to_dict(),
        })

    def complete(self, messages: Messages, **sampling: Any) -> Completion:
        return self.complete_batch([messages], **sampling)[0]

    def complete_batch(self, conversations: Sequence[Messages], **sampling: Any) -> list[Completion]:
        resolved = resolve_sampling(sampling, self.defaults)
        convs = [validate_messages(m) for m in conversations]
        keys = [cache_key(self.model_name, m, resolved) for m in convs]
        out: list[Completion | None] = [self._lookup(k) for k in keys]
        # Identical calls inside one batch are issued once.
        todo: dict[str, int] = {}
        for i, (key, value) in enumerate(zip(keys, out)):
            if value is None and key not in todo:
                todo[key] = i
        with self._lock:
            self.hits += sum(v is not None for v in out)
            self.misses += len(todo)
        errors: list[ChatError] = []
        if todo:
            idx = list(todo.values())

            def store(j: int, completion: Completion) -> None:
                i = idx[j]
                self._store(keys[i], convs[i], resolved, completion)

            fresh = complete_each(self.inner, [convs[i] for i in idx], resolved, on_result=store)
            for i, result in zip(idx, fresh):
                if isinstance(result, ChatError):
                    errors.append(result)
                else:
                    out[i] = as_completion(result, self.model_name)
            for i, key in enumerate(keys):
                if out[i] is None:
                    out[i] = out[todo[key]]
        done = [c for c in out if c is not None]
        with self._lock:
            self.failures += len(errors)
            self.seen += len(done)
            self.with_reasoning += sum(c.reasoning is not None for c in done)
        if errors:
            raise ChatError(
                f"{len(errors)} of {len(todo)} call(s) to {self.model_name} failed ({errors[0]}); the "
                f"{len(todo) - len(errors)} that succeeded are cached, so a rerun repeats only the failed ones"
            )
        self._check_reasoning()
        return done  # type: ignore[return-value]

    def _check_reasoning(self) -> None:
        if self.expect_reasoning and self.seen >= self.reasoning_probe and self.with_reasoning == 0:
            raise ChatError(
                f"{self.model_name}: none of {self.seen} replies carried a reasoning channel (looked for "
                f"{', '.join(REASONING_FIELDS)}); start the server with a reasoning parser (vLLM: "
                "`--reasoning-parser openai_gptoss` for gpt-oss) or set expect_reasoning: false for this "
                "endpoint. The replies are cached."
            )

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "failures": self.failures,
                "replies": self.seen, "with_reasoning": self.with_reasoning}
