"""A chunked body whose chunk-size line declares more than the body limit is refused at once, not at the timeout."""

from __future__ import annotations

import json
import socket
import time

from tests.loopback import HOST
from tests.server.serving import serving

HEAD = (
    b"POST /v1/rank HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def _answer(port: int, payload: bytes, within: float = 5.0) -> tuple[bytes, float]:
    """What the server sends back to ``payload`` (then closing, or within ``within`` s), and after how long."""
    with socket.create_connection((HOST, port)) as connection:
        began = time.monotonic()
        connection.sendall(payload)
        connection.settimeout(within)
        received = b""
        try:
            while chunk := connection.recv(4096):
                received += chunk
                if b"\r\n\r\n" in received and received.endswith(b"}"):
                    break
        except TimeoutError:
            pass
        return received, time.monotonic() - began


def test_a_declared_chunk_of_2_to_the_79_or_just_over_the_limit_is_a_413_at_once(tmp_path):
    """Chunk sizes of 2^79 (the most h11 reads), 2^80 (more digits than it reads) and half as much again as the limit,
    each followed by a few bytes then silence, are answered within a second; a small chunked body is ranked."""
    with serving("--model", "lexical", "--max-body-bytes", "1000", home=tmp_path) as served:
        port = int(served.url.rsplit(":", 1)[1])
        for size, status in ((2**79, b"413"), (1500, b"413"), (2**80, b"400")):
            answer, seconds = _answer(port, HEAD + b"%x\r\n" % size + b'{"items": [')
            assert answer.startswith(b"HTTP/1.1 " + status), (size, answer[:300])
            assert seconds < 1.0, (size, seconds)
            if status == b"413":
                body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
                assert body["error"]["type"] == "TooLargeError" and "1000 bytes" in body["error"]["message"], body
        body = json.dumps({"items": ["fleas on dogs", "tax forms"], "instructions": "dogs", "state": None}).encode()
        answer, _ = _answer(port, HEAD + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
