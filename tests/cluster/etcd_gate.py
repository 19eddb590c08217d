"""A gate between roomboxctl and etcd, for test_move_crash.py: an HTTP relay
on 127.0.0.1 that passes each call of etcd's JSON gateway to the members
(in the order given, the next when one does not connect), and can hold one
chosen call -- before it reaches etcd, or after etcd applied it and before
its answer goes back -- until the test lets it go or drops it.  That is how
the test stops the mover exactly after the moving key is written, just
before the commit and just after it, with nothing in the product to help
(the mover is given the gate as its only etcd endpoint, -e)."""

import base64
import http.client
import json
import socket
import socketserver
import threading
import urllib.parse


def keys_of(body):
    """Every key a call names (compare, put, delete), decoded."""
    found = set()

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "key" and isinstance(v, str):
                    try:
                        found.add(base64.b64decode(v).decode())
                    except ValueError:
                        pass
                else:
                    walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(body)
    return found


class Gate:
    def __init__(self, endpoints):
        self.endpoints = list(endpoints)
        self.rule = None            # (predicate(path, body), "before" | "after")
        self.reached = threading.Event()
        self._go = threading.Event()
        self._drop = False
        self.upstream = None        # the member the held call went to
        gate = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                gate._serve(self)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self._go.set()
        self.server.shutdown()
        self.server.server_close()

    def hold(self, predicate, when):
        self.reached.clear()
        self._go.clear()
        self._drop = False
        self.rule = (predicate, when)

    def release(self, drop=False):
        """Let the held call go on; drop: its client gets no answer (the
        connection closed), as when the member it spoke to dies."""
        self._drop = drop
        self.rule = None
        self._go.set()

    def _forward(self, path, data, first=None):
        order = ([first] if first else []) + [u for u in self.endpoints if u != first]
        last = None
        for url in order:
            u = urllib.parse.urlsplit(url)
            c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
            try:
                c.request("POST", path, body=data, headers={"Content-Type": "application/json"})
                r = c.getresponse()
                return url, r.status, r.read()
            except ConnectionRefusedError as e:
                last = e
                continue
            except OSError as e:      # it took the call and then failed: no retry here
                return url, None, repr(e).encode()
            finally:
                c.close()
        return None, None, repr(last).encode()

    def _serve(self, h):
        line = h.rfile.readline().decode("latin-1")
        if not line:
            return
        _, path, _ = line.split(" ", 2)
        length = 0
        while True:
            hl = h.rfile.readline().decode("latin-1")
            if hl in ("\r\n", "\n", ""):
                break
            name, _, value = hl.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        data = h.rfile.read(length) if length else b""
        try:
            body = json.loads(data or b"{}")
        except ValueError:
            body = {}
        rule = self.rule
        held = rule and rule[0](path, body)
        if held:
            self.rule = None
            if rule[1] == "before":
                self.reached.set()
                self._go.wait()
                if self._drop or peer_gone(h.connection):
                    return          # a call whose caller died never reached etcd
        url, status, answer = self._forward(path, data, first=self.endpoints[0])
        if held and rule[1] == "after":
            self.upstream = url
            self.reached.set()
            self._go.wait()
            if self._drop:
                return
        if status is None:
            return                  # the member failed the call: so does the relay
        h.wfile.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(answer)}\r\nConnection: close\r\n\r\n".encode() + answer)


def peer_gone(sock):
    """The client closed its side (it was killed)."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)


def moving_written(room):
    key = f"/roombox/moving/{room}"
    return lambda path, body: path == "/v3/kv/txn" and \
        any(op.get("request_put", {}).get("key") == base64.b64encode(key.encode()).decode()
            for op in body.get("success", []))


def commit(room):
    key = f"/roombox/rooms/{room}"
    return lambda path, body: path == "/v3/kv/txn" and \
        any(op.get("request_put", {}).get("key") == base64.b64encode(key.encode()).decode()
            for op in body.get("success", []))


def leader(c):
    """The member that leads etcd now (its host), from each member's
    /v3/maintenance/status."""
    ids = {}
    lead = None
    for n, url in enumerate(c.endpoints, 1):
        try:
            st = c.etcd("/v3/maintenance/status", {}, endpoints=[url])
        except AssertionError:
            continue
        ids[st["header"]["member_id"]] = f"h{n}"
        lead = st.get("leader", lead)
    return ids.get(lead)

