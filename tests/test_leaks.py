"""Leak intelligence: which site leaks and how fast, the peak and what held it, alarms,
threads, what the leaked blocks hold."""
import glob
import os
import signal
import tempfile
import time

from lib import Heaptap, Target, check, check_true, functions, test


def site_with(sites, function):
    """The site whose stack passes through function, or None."""
    for s in sites:
        if function in functions(s):
            return s
    return None


@test(needs=("waits",))
def test_steady_leak_is_the_only_suspect():
    # 50,000 bytes/s leaked; a cache that fills in 2 s and stops; churn swinging 0-500 kB.
    target = Target("trend")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "250ms", "-d", "24s"])
    ht.attached()
    target.do("run")
    final, status = ht.finish(sig=None)
    check("exit status", status, 0)
    suspects = final["suspects"]
    names = [functions(s)[1:3] for s in suspects]
    check("suspects", len(suspects), 1)
    check_true("the suspect is the steady leak", "leak_steadily" in functions(suspects[0]),
               names)
    rate = suspects[0]["growth_bytes_per_hour"]
    check_true("its rate within 10% of 180,000,000 bytes/h",
               abs(rate - 180e6) <= 18e6, rate)
    check("projected over 24 h", round(suspects[0]["projected_24h_bytes"]), round(rate * 24))
    check_true("confidence high", suspects[0]["confidence"] >= 0.8, suspects[0])
    cache = site_with(final["sites"], "fill_cache")
    churn = site_with(final["sites"], "churn")
    check("the cache's course", cache["trend"]["kind"], "plateau")
    check("the cache's live bytes", cache["live_bytes"], 200000)
    check_true("the churn is no leak",
               churn is None or churn["trend"]["kind"] not in ("leak", "growing"),
               churn and churn["trend"])


@test
def test_peak_and_what_held_it():
    target = Target("peak")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"])
    ht.attached()
    target.do("peak")
    final, status = ht.finish()
    check("exit status", status, 0)
    check("peak bytes", final["peak_bytes"], 1050000)
    check("live bytes after the fall", final["live_bytes"], 350000)
    top = final["peak_sites"]
    check("sites holding memory at the peak", len(top), 2)
    check_true("the first is rise", "rise" in functions(top[0]), functions(top[0]))
    check("rise at the peak", (top[0]["live_bytes"], top[0]["live"]), (1000000, 10))
    check_true("the second is keep_small", "keep_small" in functions(top[1]),
               functions(top[1]))
    check("keep_small at the peak", (top[1]["live_bytes"], top[1]["live"]), (50000, 5))


def alert_files(directory):
    out = {}
    for path in glob.glob(os.path.join(directory, "*.env")):
        with open(path) as f:
            env = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        out.setdefault(env["HEAPTAP_ALERT"], []).append(env)
    return out


@test
def test_alarms_fire_once_each_and_run_the_command():
    target = Target("greedy")
    with open(f"/proc/{target.target_pid}/status") as f:
        rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
    with tempfile.TemporaryDirectory() as d:
        command = f"env | grep ^HEAPTAP_ > {d}/$HEAPTAP_ALERT.$$.env"
        ht = Heaptap(["-p", str(target.target_pid), "-i", "200ms",
                      "--alert-live", "10m", "--alert-growth", "1g",
                      "--alert-rss", str(rss + (20 << 20)), "--on-alert", command])
        ht.attached()
        target.do("grow 30")
        target.do("wait")
        # Growth over: the growth alarm's figure falls back; nothing fires again.
        time.sleep(5)
        final, status = ht.finish()
        check("exit status", status, 0)
        alerts = [r for r in ht.records if r["type"] == "alert"]
        check("alarms fired, in order of crossing",
              sorted(a["alert"] for a in alerts), ["growth", "live", "rss"])
        for a in alerts:
            check_true(f"{a['alert']}: value at or above its threshold",
                       a["value"] >= a["threshold"], a)
        live = next(a for a in alerts if a["alert"] == "live")
        check("live threshold", live["threshold"], 10 << 20)
        check_true("the interval report says which fired",
                   any(r.get("alerts") for r in ht.records if r["type"] == "interval"))
        files = alert_files(d)
        check("--on-alert runs, one per alarm",
              {k: len(v) for k, v in files.items()}, {"growth": 1, "live": 1, "rss": 1})
        env = files["live"][0]
        check("its PID", env["HEAPTAP_PID"], str(target.target_pid))
        check("its threshold", env["HEAPTAP_THRESHOLD"], str(10 << 20))
        check_true("its value", int(env["HEAPTAP_VALUE"]) >= 10 << 20, env)
        check_true("stderr says it", "ALERT live" in ht.stderr_text(), ht.stderr_text())
    check_true("target still running", target.alive())


@test
def test_exit_on_alert():
    target = Target("greedy")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "200ms", "--alert-live", "5m",
                  "--exit-on-alert"])
    ht.attached()
    target.do("grow 50")
    final, status = ht.finish(sig=None)
    check("exit status of --exit-on-alert", status, 3)
    check_true("ended early, before the growth did",
               final["live_bytes"] < 50 << 20, final["live_bytes"])
    check_true("target still running", target.alive())
    target.do("wait")


@test(sanitized=True)
def test_live_bytes_by_thread_exited_included():
    target = Target("workers")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"])
    ht.attached()
    tids = [int(t) for t in target.do("workers 4").split()]
    stayer = int(target.do("stay"))
    final, status = ht.finish()
    check("exit status", status, 0)
    by_tid = {t["tid"]: t for t in final["threads"]}
    for i, tid in enumerate(tids, 1):
        t = by_tid.get(tid)
        check_true(f"worker-{i} listed", t is not None, final["threads"])
        check(f"worker-{i}", (t["name"], t["live_bytes"], t["live"], t["exited"]),
              (f"worker-{i}", 1000 * i, i, True))
    check("the thread that stays",
          (by_tid[stayer]["name"], by_tid[stayer]["live_bytes"], by_tid[stayer]["exited"]),
          ("stayer", 500, False))
    # The main thread may hold blocks of its own: glibc's pthread_create allocates each new
    # thread's TLS vector there.
    check("no other thread", sorted(set(by_tid) - {target.target_pid}), sorted(tids + [stayer]))


@test(sanitized=True)
def test_dump_shows_string_and_class():
    target = Target("dumps")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"])
    ht.attached()
    target.do("leak")
    # Read while the target still runs: the final report comes after the signal.
    final, status = ht.finish()
    check("exit status", status, 0)
    greeting = site_with(final["sites"], "remember_greeting")
    widget = site_with(final["sites"], "make_widget")
    check("greeting block dumped", len(greeting["blocks"]), 1)
    block = greeting["blocks"][0]
    check("bytes shown (--dump-bytes default 64)", len(block["bytes"]), 128)
    check_true("the string flagged",
               "heaptap dump marker: hello, leak" in block["strings"], block)
    check("no class for a string", block["class"], None)
    check("the object's class", widget["blocks"][0]["class"], "shop::Widget")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--dump-bytes", "8"])
    ht.attached()
    target.do("leak")
    final, status = ht.finish()
    block = site_with(final["sites"], "remember_greeting")["blocks"][0]
    check("--dump-bytes 8", block["bytes"], b"heaptap ".hex())
