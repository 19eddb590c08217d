"""FastCGI records in Python, for tests that speak to roombox-fcgi's socket
themselves, as a web server would (or as a peer that does not behave like
one): requests built from records, answers read back from them."""

import socket
import struct
import time

BEGIN_REQUEST, END_REQUEST, PARAMS, STDIN, STDOUT = 1, 3, 4, 5, 6
RESPONDER = 1
KEEP_CONN = 1      # BEGIN_REQUEST's flag: keep the connection for the next request


def record(kind, content=b"", request_id=1):
    return struct.pack(">BBHHBB", 1, kind, request_id, len(content), 0, 0) + content


def name_value(name, value):
    def length(n):
        return bytes([n]) if n < 128 else struct.pack(">I", n | 0x80000000)
    return length(len(name)) + length(len(value)) + name + value


def begin(flags=0):
    """BEGIN_REQUEST of a responder."""
    return record(BEGIN_REQUEST, struct.pack(">HB5x", RESPONDER, flags))


def params(values):
    """The PARAMS records of a dict of str, ended."""
    pairs = b"".join(name_value(k.encode(), v.encode()) for k, v in values.items())
    return record(PARAMS, pairs) + record(PARAMS)


def read_answer(sock, seconds):
    """(stdout bytes, whether END_REQUEST came) within `seconds`."""
    deadline = time.monotonic() + seconds
    buf, out, ended = b"", b"", False
    while not ended and time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 8:
            _, kind, _, clen, plen, _ = struct.unpack(">BBHHBB", buf[:8])
            if len(buf) < 8 + clen + plen:
                break
            if kind == STDOUT:
                out += buf[8:8 + clen]
            ended = ended or kind == END_REQUEST
            buf = buf[8 + clen + plen:]
    return out, ended
