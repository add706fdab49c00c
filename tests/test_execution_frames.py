"""The runner's reader of a child's framed output: bytes in, events out, no process."""

from __future__ import annotations

import json
import random

import pytest

from concord.execution.harness import HEADER_MAX, OUTPUT_SLACK, FrameReader, scan_frames

TOKEN = "ab" * 16


def frame(event: dict, payload: str | None = None, token: str = TOKEN) -> bytes:
    """A frame as the child's reporter writes it."""
    body = b""
    if payload is not None:
        body = payload.encode()
        event = dict(event, n=len(body))
    return b"\n" + token.encode() + b" " + json.dumps(event).encode() + b"\n" + body


def test_results_in_order_with_the_candidates_own_bytes_skipped():
    data = (b"noise\n" * 100 + frame({"setup": True}) + b"print me\n"
            + frame({"k": 0, "status": "ok", "error": None}, "line 1\nline 2\n") + b"\n\n"
            + frame({"k": 1, "status": "error", "error": "boom"}))
    events = scan_frames(data, TOKEN, start=0, last=2)
    assert events == [("setup",), ("result", 0, {"k": 0, "status": "ok", "error": None, "n": 14}, "line 1\nline 2\n"),
                      ("result", 1, {"k": 1, "status": "error", "error": "boom"}, None)]


def test_any_split_into_chunks_gives_the_same_events():
    data = (frame({"setup": True}) + b"x" * 1000 + frame({"defined": True})
            + frame({"k": 3, "status": "ok", "plain": True}, "[1, 2]") + b"junk " + TOKEN.encode()[:10]
            + frame({"k": 4, "status": "ok"}, "é" * 50) + frame({"k": 5, "status": "ok"}, ""))
    whole = scan_frames(data, TOKEN, start=3, last=6)
    assert [e[0] for e in whole] == ["setup", "defined", "result", "result", "result"]
    assert whole[1] == ("defined", 3)
    rng = random.Random(0)
    for _ in range(50):
        reader, events, at = FrameReader(TOKEN, 3, 6, 1 << 20), [], 0
        while at < len(data):
            step = rng.choice([1, 2, 7, 64, 4096])
            events += reader.feed(data[at:at + step])
            at += step
        assert events == whole


@pytest.mark.parametrize("header", [
    b"[" * 5000 + b"]" * 5000,  # nesting past any recursion limit
    b'{"k": 0, "status": "ok"',  # cut short
    b"\xff\xfe not text",
    b"42",  # JSON, but no object
])
def test_an_unreadable_header_is_no_frame(header):
    data = b"\n" + TOKEN.encode() + b" " + header + b"\n" + frame({"k": 0, "status": "ok"})
    assert scan_frames(data, TOKEN) == [("result", 0, {"k": 0, "status": "ok"}, None)]


def test_an_oversized_header_is_skipped_without_waiting_for_its_end():
    reader = FrameReader(TOKEN, 0, 1, 1 << 20)
    assert reader.feed(b"\n" + TOKEN.encode() + b" " + b"{" + b" " * (HEADER_MAX + 10)) == []
    assert len(reader.buf) < HEADER_MAX  # nothing of it kept
    assert reader.feed(b"\n" + frame({"k": 0, "status": "ok"})) == [("result", 0, {"k": 0, "status": "ok"}, None)]


def test_frames_of_another_token_or_input_and_ill_typed_ones_are_ignored():
    data = (frame({"k": 0, "status": "ok"}, "forged", token="cd" * 16) + frame({"k": 1, "status": "ok"})
            + frame({"k": True, "status": "ok"}) + frame({"k": 0, "status": "ok", "n": -1})
            + frame({"k": 0, "status": "ok"}, "mine"))
    assert scan_frames(data, TOKEN, start=0, last=2) == [
        ("result", 0, {"k": 0, "status": "ok", "n": -1}, None)]


def test_nothing_is_reported_past_the_last_input():
    data = frame({"k": 0, "status": "ok"}, "a") + frame({"k": 1, "status": "ok"}, "b")
    assert [e[1] for e in scan_frames(data, TOKEN, start=0, last=1)] == [0]


def test_bounds_end_the_unit_of_work():
    flood = b"".join(frame({"k": 9, "status": "ok"}) for _ in range(100))
    assert scan_frames(flood, TOKEN, start=0, last=1)[-1] == (
        "stop", {"status": "error", "error": "wrote more result frames than inputs"})
    assert scan_frames(frame({"k": 0, "status": "ok"}, "x" * 101), TOKEN, cap=100) == [
        ("stop", {"status": "error", "error": "output exceeded 100 bytes"})]
    reader = FrameReader(TOKEN, 0, 1, 100)
    assert reader.feed(b"y" * (100 + OUTPUT_SLACK)) == []
    assert reader.feed(b"y") == [("stop", {"status": "error", "error": "output exceeded 100 bytes"})]
    assert reader.feed(frame({"k": 0, "status": "ok"})) == []  # nothing after a stop


def test_a_payload_that_is_not_utf8_is_an_error_of_that_input():
    data = frame({"k": 0, "status": "ok"}, "zz")[:-2] + b"\xff\xfe"
    assert scan_frames(data, TOKEN) == [("result", 0, {"status": "error", "error": "output is not UTF-8 text"}, None)]
