#!/usr/bin/python3.11
"""A Python server that leaks: it serves HTTP requests (each makes and drops objects) and,
asked, keeps Session objects in a global list at 10,000 a second. Speaks proto.h's protocol
on stdin and stdout: "ready PID", then a "done COMMAND ..." line per command:

  port               the HTTP server's port
  leak N             N Session objects kept, 10,000 a second, with 100 Slotted and 100 Row
  census             how many objects of each class live (the garbage collector's count) and
                     their sizes (sys.getsizeof), as JSON
  work N             N Session objects made and dropped, and a list of 10 kept a while:
                     the seconds it took
  decimals N         N decimal.Decimal objects kept (a C extension's type, made by
                     _PyObject_New)
  fork N             a child that keeps N Session objects (as leak N), then sleeps a minute:
                     its PID (as the first PID namespace sees it)

Its PID is said as the first PID namespace sees it (under unshare --pid, not 1).
"""
import decimal
import gc
import http.server
import json
import os
import sys
import threading
import time


class Session:
    def __init__(self, n):
        self.n = n
        self.user = "user%d" % n


class Slotted:
    __slots__ = ("a", "b", "c")


class Row(tuple):
    pass


kept = []
decimals = []


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        # Made and dropped by each request.
        made = [Session(i) for i in range(50)]
        body = json.dumps({"made": len(made)}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def leak(n):
    start = time.monotonic()
    for i in range(n):
        kept.append(Session(i))
        if i % 1000 == 999:
            # 10,000 a second.
            time.sleep(max(0.0, start + (i + 1) / 10000 - time.monotonic()))
    for i in range(100):
        kept.append(Slotted())
        kept.append(Row((1, 2, 3, i)))


def work(n):
    start = time.perf_counter()
    recent = []
    for i in range(n):
        recent.append(Session(i))
        if len(recent) == 10:
            recent = []
    return time.perf_counter() - start


def census():
    counts = {}
    for o in gc.get_objects():
        name = type(o).__name__
        if type(o) in (Session, Slotted, Row):
            counts[name] = counts.get(name, 0) + 1
    sizes = {"Session": sys.getsizeof(Session(0)), "Slotted": sys.getsizeof(Slotted()),
             "Row": sys.getsizeof(Row((1, 2, 3, 4))), "Row_itemsize": Row.__itemsize__,
             "Decimal": sys.getsizeof(decimal.Decimal(1))}
    # Decimal objects are not the collector's: those kept are all there are of them.
    counts["Decimal"] = len(decimals)
    return {"counts": counts, "sizes": sizes, "kept": len(kept)}


def host_pid():
    """This process's PID in the outermost PID namespace /proc knows (NStgid's first)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("NStgid:"):
                return int(line.split()[1])
    return os.getpid()


def fork_leak(n):
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        leak(n)
        os.write(w, b"%d\n" % host_pid())
        os.close(w)
        time.sleep(60)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        return f.readline().strip()


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("ready", host_pid(), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "port":
            out = str(server.server_address[1])
        elif words[0] == "leak":
            leak(int(words[1]))
            out = ""
        elif words[0] == "work":
            out = "%.6f" % work(int(words[1]))
        elif words[0] == "decimals":
            decimals.extend(decimal.Decimal(i) for i in range(int(words[1])))
            out = ""
        elif words[0] == "fork":
            out = fork_leak(int(words[1]))
        elif words[0] == "census":
            out = json.dumps(census())
        else:
            out = "unknown"
        print("done", line.strip(), out, flush=True)


main()
