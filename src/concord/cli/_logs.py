"""Job logs without terminal control characters.

Every rule sends a command's stderr to a log file. Progress bars (tqdm, also inside transformers
and TRL) redraw one terminal line with carriage returns and move the cursor with ANSI escapes
(nested bars); in a file that is one unreadable line full of ``\\r`` and ``ESC[A``. When stderr is
not a terminal, :class:`LineLog` turns every redraw into its own line and drops the escapes, so a
log reads top to bottom; :func:`quiet_bars` also makes the bars redraw at most once per second.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TextIO

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class LineLog:
    """A text stream wrapper: ``\\r`` ends the current line (empty lines are dropped), ANSI escape
    sequences are removed, everything else passes through unchanged."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self._line_open = False  # something was written since the last newline

    def write(self, text: str) -> int:
        out = []
        for piece in re.split(r"(\r\n|\r|\n)", _ANSI.sub("", text)):
            if piece in ("\n", "\r\n"):
                out.append("\n")
                self._line_open = False
            elif piece == "\r":
                if self._line_open:
                    out.append("\n")
                    self._line_open = False
            elif piece:
                out.append(piece)
                self._line_open = True
        self._stream.write("".join(out))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name):  # fileno, encoding, ... of the wrapped stream
        return getattr(self._stream, name)


def quiet_bars() -> None:
    """Before tqdm is imported: when stderr is a file, redraw bars at most once per second (tqdm
    reads ``TQDM_*`` defaults from the environment at import) and clean the stream."""
    if sys.stderr.isatty() or isinstance(sys.stderr, LineLog):
        return
    os.environ.setdefault("TQDM_MININTERVAL", "1")
    sys.stderr = LineLog(sys.stderr)
