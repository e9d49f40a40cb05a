"""The messages between a command and its warm engine, over the engine's Unix socket: each a JSON object behind
its length (4 bytes, big-endian). The first message of a command carries the command's stdin, stdout and stderr
as file descriptors (SCM_RIGHTS), so that the engine writes to the very terminal, pipe or file the command was
given: what `isatty()`, a closed pipe or a full disk do is what they do without an engine.

    command -> engine   {"command": argv, "cwd", "env", "pid", "fingerprint", "project"}  + fds 0, 1, 2
    engine -> command   {"accepted": {"pid", "since", "commands"}}  or  {"restart": why}  or  {"refused": why}
    command -> engine   {"signal": N}          (Ctrl-C, SIGTERM, SIGHUP: the engine cancels that command's work)
    engine -> command   {"exit": code}
    command -> engine   {"status": true} / {"stop": true}   (`ratui engine status | stop`: no descriptors)
"""

from __future__ import annotations

import json
import socket
import struct

MAX_MESSAGE = 16 * 1024 * 1024  # an environment and an argv fit many times over
_HEAD = struct.Struct(">I")


class WireError(Exception):
    """The other side sent something that is not a message, or went away mid-message."""


def send(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    body = json.dumps(message, separators=(",", ":")).encode()
    data = _HEAD.pack(len(body)) + body
    if fds:
        sent = socket.send_fds(sock, [data], fds)
        data = data[sent:]
    if data:
        sock.sendall(data)


class Reader:
    """The messages of one connection, in order (two may come in one read)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def next(self, max_fds: int = 0) -> tuple[dict | None, list[int]]:
        """The next message and the descriptors that came with it; (None, []) when the other side closed."""
        fds: list[int] = []
        try:
            while True:
                if len(self.buffer) >= _HEAD.size:
                    (size,) = _HEAD.unpack(self.buffer[:_HEAD.size])
                    if size > MAX_MESSAGE:
                        raise WireError(f"a message of {size} bytes")
                    if len(self.buffer) >= _HEAD.size + size:
                        body = bytes(self.buffer[_HEAD.size:_HEAD.size + size])
                        del self.buffer[:_HEAD.size + size]
                        message = json.loads(body)
                        if not isinstance(message, dict):
                            raise WireError("a message that is not an object")
                        return message, fds
                if max_fds and not fds:
                    chunk, fds, _flags, _addr = socket.recv_fds(self.sock, 65536, max_fds)
                else:
                    chunk = self.sock.recv(65536)
                if not chunk:
                    if self.buffer:
                        raise WireError("closed mid-message")
                    _close(fds)
                    return None, []
                self.buffer += chunk
        except (WireError, ValueError):
            _close(fds)
            raise


def _close(fds: list[int]) -> None:
    import os

    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
