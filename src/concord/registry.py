"""One registry type for every named operator concord dispatches on by name.

Consensus methods, reward arms, generation engines, FMV selection methods and SC-MoA tasks are
each a :class:`Registry`: a name -> object table filled with :meth:`Registry.register` (a
decorator) by the module that defines the operator. Looking up an unknown name fails with the
close matches and every known name, as lm-evaluation-harness's registry does::

    >>> arms = Registry("reward arm")
    >>> @arms.register("core")
    ... def core(groups): ...
    >>> arms.get("cor")
    Traceback (most recent call last):
    ...
    concord.registry.UnknownNameError: unknown reward arm 'cor'. Did you mean: 'core'? Available: 'core'

The shared layer (this package outside ``concord.papers``) never imports a paper package. The
paper packages register their operators into these registries when they are imported; the
command line imports :mod:`concord.papers` once, so every operator is known to every command.
"""

from __future__ import annotations

import difflib
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class UnknownNameError(ValueError):
    """A name that no operator of this kind was registered under."""


class Registry(Generic[T]):
    """Named operators of one kind (``kind`` appears in error messages).

    Args:
        kind: what the entries are, e.g. ``"reward arm"``.
        hint: appended to the unknown-name error, e.g. where more entries come from.
    """

    def __init__(self, kind: str, hint: str = "") -> None:
        self.kind = kind
        self.hint = hint
        self._entries: dict[str, T] = {}

    def register(self, name: str, obj: T | None = None) -> Callable[[T], T] | T:
        """Register ``obj`` under ``name`` (or decorate it). Re-registering replaces the entry,
        so a user module can override a built-in operator on purpose."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} needs a non-empty string name, got {name!r}")

        def _add(value: T) -> T:
            self._entries[name] = value
            return value

        return _add(obj) if obj is not None else _add

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UnknownNameError(self._unknown_message(name)) from None

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def _unknown_message(self, name: object) -> str:
        known = self.names()
        close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.6)
        message = f"unknown {self.kind} {name!r}."
        if close:
            message += " Did you mean: " + ", ".join(repr(c) for c in close) + "?"
        message += " Available: " + (", ".join(repr(k) for k in known) if known else "none")
        if self.hint:
            message += f" ({self.hint})"
        return message
