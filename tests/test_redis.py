"""A real server from Debian, as its users run it: redis-server (jemalloc, no frame
pointers) under redis-benchmark, its key set growing."""
import os
import socket
import subprocess
import tempfile
import time

from lib import Failure, Heaptap, Proc, check, check_true, functions, test


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, timeout=30):
    """Until the server accepts connections: a handshake, not a sleep."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise Failure(f"redis-server exited: {proc.stderr_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise Failure(f"redis-server not listening on {port} after {timeout}s")


def start_redis(port, workdir):
    """redis-server on a loopback port, no persistence of its own, once it listens."""
    redis = Proc(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                  "--appendonly", "no", "--daemonize", "no", "--dir", workdir],
                 stdin=subprocess.DEVNULL)
    wait_listening(port, redis)
    return redis


@test(tier="services")
def test_redis_set_path_through_jemalloc():
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="heaptap-redis-") as workdir:
        redis = start_redis(port, workdir)
        ht = Heaptap(["-p", str(redis.pid), "-i", "1h", "--top", "3"])
        attached = ht.attached()
        check("allocator", os.path.basename(attached["allocator"]["path"]), "libjemalloc.so.2")
        # Few clients: their 16 KiB query buffers stay smaller than the key set.
        bench = subprocess.run(["redis-benchmark", "-p", str(port), "-t", "set", "-c", "5",
                                "-n", "20000", "-r", "100000", "-q"], capture_output=True,
                               text=True, timeout=600)
        check("redis-benchmark exit status", bench.returncode, 0)
        final, status = ht.finish()
    check("heaptap exit status", status, 0)
    top = final["sites"][0]
    names = functions(top)
    check("top site's allocator entry", (names[0], os.path.basename(top["stack"][0]["module"])),
          ("malloc", "libjemalloc.so.2"))
    check_true("top site's stack reaches the SET command handler",
               "setGenericCommand" in names and "setCommand" in names, names)
    check("stack mode", final["stacks"]["mode"], "dwarf")
    check_true("redis-server still serving", redis.popen.poll() is None)


@test(tier="services")
def test_redis_bgsave_child_followed():
    """redis forks a child for BGSAVE: with --follow it is traced (its parent, its calls, its
    end), the server serving on."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="heaptap-redis-") as workdir:
        redis = start_redis(port, workdir)
        # Enough keys for the child to take a while writing them.
        fill = subprocess.run(["redis-benchmark", "-p", str(port), "-t", "set", "-c", "2",
                               "-P", "64", "-d", "100", "-n", "300000", "-r", "300000", "-q"],
                              capture_output=True, timeout=300)
        check("redis-benchmark exit status", fill.returncode, 0)
        ht = Heaptap(["-p", str(redis.pid), "-f", "-i", "300ms"])
        ht.attached()
        cli = subprocess.run(["redis-cli", "-p", str(port), "bgsave"], capture_output=True,
                             text=True, timeout=60)
        check_true("BGSAVE started", "Background saving started" in cli.stdout, cli.stdout)
        deadline = time.monotonic() + 60
        child = None
        while child is None or child["alive"]:
            rec = ht.record()
            check_true("reports until the BGSAVE child has ended",
                       rec is not None and time.monotonic() < deadline,
                       rec and rec["processes"])
            child = next((p for p in rec["processes"] if p["parent"] == redis.pid), None)
        check_true("the child allocated (its RDB writer's buffers)", child["alloc_calls"] > 0,
                   child)
        check("the child, traced from its fork (its probes inherited)",
              (rec["inexact"]["late_procs"], child["late_ms"]), (0, None))
        check_true("dump.rdb written", os.path.exists(os.path.join(workdir, "dump.rdb")))
        ping = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                              text=True, timeout=30)
        check("redis-server still serving", ping.stdout.strip(), "PONG")
        final, status = ht.finish()
    check("heaptap exit status", status, 0)
