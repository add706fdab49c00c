"""The child's framed output, read by the runner: a pure ``bytes -> events`` parser.

A child reports a result on its stdout as a line ``<token> <json header>`` followed by the
header's ``n`` bytes of payload (the output or the encoded return value). The token is random
per child; bytes without it are the candidate's own writes to fd 1 and are dropped in bulk
(``bytes.find`` for the token: no Python step per line), but every byte read counts against the
output cap. A header is at most ``HEADER_MAX`` bytes, a unit of work writes a bounded number of
frames, and only the fields of a result leave the runner, each checked for type and size
(*threat: a candidate that digs out its token and forges frames nested, huge or ill-typed to make
the trusted side raise and lose the batch*). Standard library only; no process, clock or
descriptor here: the runner feeds what it reads and acts on the events.
"""

from __future__ import annotations

import json

from concord.execution.harness.base import ERROR_KEEP, HEADER_MAX, OUTPUT_SLACK


class FrameReader:
    """Events from a child's stdout, fed in chunks as they arrive, for inputs ``start`` up to
    ``last`` (exclusive) under an output cap of ``cap`` bytes. Events, in order:

    * ``("setup",)`` -- the child's isolation is set up (its candidate's clock may start);
    * ``("defined", k)`` -- call mode: the program is defined, while input ``k`` was due;
    * ``("result", k, event, raw)`` -- input ``k``'s result: the header (a dict, checked by
      :func:`_result` before it leaves the runner) and its payload (str), or None without one;
    * ``("stop", {"status": "error", "error": ...})`` -- the unit of work must end: more
      frames than a child writes, a payload over the cap, or more output than cap plus slack.
      Nothing is read after it.

    Work per byte fed is bounded: frames are found with ``bytes.find``, a header is at most
    ``HEADER_MAX`` bytes and is parsed at Python's default recursion limit, and at most
    ``2 * (last - start) + 8`` headers are parsed (a legitimate child writes one per input plus
    "setup" and "defined"; more can only come from a candidate that dug the token out of its
    memory)."""

    def __init__(self, token: str, start: int, last: int, cap: int) -> None:
        self.tag = token.encode() + b" "
        self.k, self.last, self.cap = start, last, cap
        self.max_frames = 2 * (last - start) + 8
        self.buf = bytearray()
        self.since = 0  # bytes read since the last result
        self.frames = 0
        self.pending: dict | None = None  # a header whose payload is still arriving
        self.stopped = False

    def feed(self, chunk: bytes) -> list[tuple]:
        events: list[tuple] = []
        if self.stopped:
            return events
        self.since += len(chunk)
        self.buf += chunk
        while not self.stopped and self.k < self.last:
            event = self._next()
            if event is None:
                break
            events.append(event)
        if not self.stopped and self.since > self.cap + OUTPUT_SLACK:
            events.append(self._stop(f"output exceeded {self.cap} bytes"))
        return events

    def _stop(self, error: str) -> tuple:
        self.stopped = True
        return ("stop", {"status": "error", "error": error})

    def _result(self, event: dict, raw: str | None) -> tuple:
        k = self.k
        self.k += 1
        self.since = len(self.buf)
        return ("result", k, event, raw)

    def _next(self) -> tuple | None:
        """The next event in the buffer, or None when more bytes are needed."""
        buf = self.buf
        while True:
            if self.pending is not None:
                n = self.pending["n"]
                if len(buf) < n:
                    return None
                payload = bytes(buf[:n])
                del buf[:n]
                event, self.pending = self.pending, None
                # Strict UTF-8: a lone surrogate (`print('\\ud800')`) is no text a program can
                # write to a UTF-8 stdout (Python raises UnicodeEncodeError there, so the reference
                # harnesses see a crash), and no text every later consumer could encode.
                raw = payload.decode("utf-8") if _utf8(payload) else None
                if raw is None:
                    event = {"status": "error", "error": "output is not UTF-8 text"}
                return self._result(event, raw)
            at = buf.find(self.tag)
            if at < 0:
                keep = len(self.tag) - 1  # the start of a tag may end this chunk
                if len(buf) > keep:
                    del buf[: len(buf) - keep]
                return None
            body = at + len(self.tag)
            end = buf.find(b"\n", body, body + HEADER_MAX + 1)
            if end < 0:
                if len(buf) - body <= HEADER_MAX:
                    del buf[:at]  # the rest of this header is still to come
                    return None
                del buf[:body]  # an oversized header is no frame of ours
                continue
            header = bytes(buf[body:end])
            del buf[: end + 1]
            found = self._header(header)
            if found is not None:
                return found

    def _header(self, header: bytes) -> tuple | None:
        """The event a complete header makes, or None (no frame, or its payload is to come)."""
        self.frames += 1
        if self.frames > self.max_frames:
            return self._stop("wrote more result frames than inputs")
        event = _parse(header)
        if event is None:
            return None
        if event.get("setup") is True:
            return ("setup",)
        if event.get("defined") is True:
            return ("defined", self.k)
        if event.get("k") != self.k or isinstance(event.get("k"), bool):
            return None
        n = event.get("n")
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            if n > self.cap:
                return self._stop(f"output exceeded {self.cap} bytes")
            self.pending = dict(event, n=n)
            return None
        return self._result(event, None)


def scan_frames(data: bytes, token: str, start: int = 0, last: int = 1, cap: int = 1 << 20) -> list[tuple]:
    """Every event in ``data`` (as :class:`FrameReader` gives them when fed it at once)."""
    return FrameReader(token, start, last, cap).feed(data)


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _parse(data: bytes):
    """A frame header (at most ``HEADER_MAX`` bytes, so bounded work), or None. Any failure to
    read it -- bad text, bad JSON, nesting past the recursion limit -- makes it no frame."""
    try:
        event = json.loads(data.decode("utf-8", "surrogatepass"))
    except Exception:  # noqa: BLE001 -- whatever a forged header makes json raise
        return None
    return event if isinstance(event, dict) else None


def _result(k: int, event: dict, raw: str | None) -> dict:
    """The event sent to the trusted parent: only the fields of a result, each of its own type
    and bounded size whatever the frame carried (a forged frame may carry anything)."""
    status = event.get("status")
    if status not in ("ok", "error"):
        return {"k": k, "status": "error", "plain": None, "error": "malformed result", "raw": None}
    plain = event.get("plain")
    error = event.get("error")
    if isinstance(error, str):
        # An exception's text may carry lone surrogates (`raise ValueError('\\ud800')`): kept as
        # escapes, so that every consumer of the outcome can encode it.
        error = error[:ERROR_KEEP].encode("utf-8", "backslashreplace").decode("utf-8")
    else:
        error = None
    return {"k": k, "status": status, "plain": plain if isinstance(plain, bool) else None,
            "error": error, "raw": raw}
