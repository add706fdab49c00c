"""Batch the calls of many independent tasks (SC-MoA's questions) together, round by round.

SC-MoA issues each phase of a question as one batch of 1-6 conversations, so an in-process engine
decodes a handful of rows at a time while the same phase of every other question waits its turn.
:meth:`LockstepChat.map` runs every task in a thread of its own and gathers their calls round by
round: when every unfinished task is waiting on a call, the waiting calls go to the engine as one
batch per sampling setting and length class (prompts within a factor of two), in task order, and
each task gets its replies.

Written here because no library does what this needs: vLLM's and TGI's continuous batching, or a
thread pool against a server, batch whatever arrives together in time, so which rows share a
padded batch (and with it the bf16 numerics of each row) would depend on timing. Here a batch's
composition depends only on the tasks' own calls: one task runs at a time, in task order, until it
waits on a call or finishes, and a round is dispatched only when no task can run. The result is
byte-identical across reruns on one machine, and no task code ever runs concurrently with another
(the sandbox, the cache's counters and logging see one caller at a time, as before).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from concord.chat.base import ChatError, Completion, Messages, as_completion, chat_model_name, complete_batch

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class _Call:
    conversations: list[Messages]
    sampling: dict[str, Any]
    replies: list[Completion] | None = None
    error: BaseException | None = None


@dataclass
class _Task:
    index: int
    go: threading.Event = field(default_factory=threading.Event)  # the coordinator lets this task run
    stopped: threading.Event = field(default_factory=threading.Event)  # the task waits on a call or is done
    call: _Call | None = None
    done: bool = False


class LockstepChat:
    """A chat whose calls, made from the tasks of :meth:`map`, are batched across tasks.

    Outside :meth:`map` (or from a thread it did not start) a call goes straight to ``inner``.
    ``rounds`` and ``rows`` count the batched engine calls and the conversations they carried.
    """

    def __init__(self, inner: Any):
        self.inner = inner
        self.model_name = chat_model_name(inner)
        self._tasks: dict[int, _Task] = {}  # thread ident -> its task, while a map runs
        self.rounds = 0
        self.rows = 0

    # ------------------------------------------------------------------ the chat interface

    def complete(self, messages: Messages, **sampling: Any) -> Completion:
        return self.complete_batch([messages], **sampling)[0]

    def complete_batch(self, conversations: Sequence[Messages], **sampling: Any) -> list[Completion]:
        task = self._tasks.get(threading.get_ident())
        if task is None:
            return complete_batch(self.inner, conversations, **sampling)
        if not conversations:  # nothing to wait for
            return []
        task.call = _Call(list(conversations), dict(sampling))
        task.go.clear()
        task.stopped.set()  # hand the turn back to the coordinator ...
        task.go.wait()  # ... and wait for the round's replies
        call, task.call = task.call, None
        if call.error is not None:
            raise call.error
        return call.replies  # type: ignore[return-value]

    # ------------------------------------------------------------------ running tasks

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(item) for item in items]``, every item's calls to this chat batched with the others'.

        An exception raised by ``fn`` is re-raised (the first, by item order) once every task has
        finished; a failed engine call raises its error in each task that made one of its calls.
        """
        items = list(items)
        tasks = [_Task(i) for i in range(len(items))]
        results: list[Any] = [None] * len(items)
        errors: list[BaseException | None] = [None] * len(items)

        def body(task: _Task) -> None:
            self._tasks[threading.get_ident()] = task
            task.go.wait()
            try:
                results[task.index] = fn(items[task.index])
            except BaseException as exc:  # noqa: BLE001 -- re-raised by map, in item order
                errors[task.index] = exc
            finally:
                del self._tasks[threading.get_ident()]
                task.done = True
                task.stopped.set()

        threads = [threading.Thread(target=body, args=(t,), daemon=True, name=f"lockstep-{t.index}") for t in tasks]
        for thread in threads:
            thread.start()
        waiting = list(tasks)
        start, round_ = time.monotonic(), 0
        while waiting:
            for task in waiting:  # one task at a time, in item order, until it calls or finishes
                task.stopped.clear()
                task.go.set()
                task.stopped.wait()
            waiting = [t for t in waiting if not t.done]
            if waiting:
                round_ += 1
                calls = [t.call for t in waiting]
                batches = self._dispatch(calls)  # type: ignore[arg-type]
                # Progress, since a round is the only moment the job knows how far it is.
                log.info("round %d: %d of %d tasks waited on %d conversations, sent in %d engine batch(es); "
                         "%.1f s since the start", round_, len(waiting), len(tasks),
                         sum(len(c.conversations) for c in calls), batches, time.monotonic() - start)
        for thread in threads:
            thread.join()
        for exc in errors:
            if exc is not None:
                raise exc
        return results

    def _dispatch(self, calls: list[_Call]) -> int:
        """One engine call per sampling setting and length class, conversations in task order;
        returns how many engine calls that made."""
        groups: dict[tuple[str, int], list[tuple[_Call, int]]] = {}
        for call in calls:
            setting = json.dumps(call.sampling, sort_keys=True, default=str)
            for j, messages in enumerate(call.conversations):
                groups.setdefault((setting, _length_class(messages)), []).append((call, j))
        replies: dict[int, list[Completion | None]] = {id(c): [None] * len(c.conversations) for c in calls}
        for group in groups.values():
            conversations = [call.conversations[j] for call, j in group]
            try:
                batch = [as_completion(c, self.model_name)
                         for c in complete_batch(self.inner, conversations, **group[0][0].sampling)]
                if len(batch) != len(conversations):
                    raise ChatError(f"{self.model_name} returned {len(batch)} replies for {len(conversations)} "
                                    "conversations")
            except Exception as exc:  # noqa: BLE001 -- each task that called gets the error
                for call, _ in group:
                    call.error = exc
                continue
            self.rounds += 1
            self.rows += len(conversations)
            for (call, j), reply in zip(group, batch):
                replies[id(call)][j] = reply
        for call in calls:
            if call.error is None:
                call.replies = replies[id(call)]  # type: ignore[assignment]
        return len(groups)


def _length_class(messages: Messages) -> int:
    """Conversations within a factor of two in length share a batch: a padded batch prefills every
    row to its longest prompt, and prefill is most of a short-answer call's cost (SC-MoA's
    aggregation prompts are 5x its proposal prompts)."""
    return max(1, sum(len(str(m.get("content") or "")) for m in messages)).bit_length()
