"""Framed pickle messages between the verifier and its worker processes (both sides import this)."""

from __future__ import annotations

import pickle
import select
import socket
import struct
import time


_HEADER = struct.Struct(">I")


def _send(sock: socket.socket, obj) -> None:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HEADER.pack(len(payload)) + payload)


class _Reader:
    """Framed pickle messages from a socket, with a deadline."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buffer = b""

    def read(self, deadline: float | None):
        while True:
            if len(self.buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(self.buffer)
                end = _HEADER.size + size
                if len(self.buffer) >= end:
                    payload, self.buffer = self.buffer[_HEADER.size : end], self.buffer[end:]
                    return pickle.loads(payload)
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                ready, _, _ = select.select([self.sock], [], [], remaining)
                if not ready:
                    return None
            try:
                chunk = self.sock.recv(1 << 16)
            except OSError:
                return None
            if not chunk:
                return None
            self.buffer += chunk
