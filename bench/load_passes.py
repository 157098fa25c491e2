#!/usr/bin/env python3
"""load_passes.py: what makes a storm's passes long, from a broker recorded
by `LOAD_PERF=DIR bench/run load` (perf: cpu-clock samples with call chains,
and epoll_wait's entries and exits, on CLOCK_MONOTONIC).

    bench/load_passes.py DIR/load-plugin-1.data DIR/load-plugin-1.out

A pass of the broker's loop is the time from one epoll_wait's return to the
next epoll_wait on the broker's main thread: what a steady client's packet
may wait behind. For the two seconds before storm 1, its connect part (until
every device has its SUBACKs) and its pages part (until every device has
caught up), the script prints the passes' count and length (p50, p99, max)
and, for the samples taken inside passes longer than the before-window's
p99, the functions they were in (self) and under (inclusive), in percent of
those samples.
"""
import collections
import subprocess
import sys

FREQ = 1999  # perf record -F in bench/run (LOAD_PERF)


def keys(path):
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            if v:
                out[k] = v
    return out


def events(data):
    """(time_s, kind, frames) of the main thread; frames innermost first."""
    script = subprocess.run(
        ["perf", "script", "-i", data, "--ns", "-F", "pid,tid,time,event,ip,sym,dso"],
        check=True, capture_output=True, text=True).stdout
    main = None
    cur = None
    for line in script.splitlines():
        if not line.strip():
            if cur:
                yield cur
            cur = None
            continue
        if line[0] in " \t" and cur is not None and line.startswith("\t"):
            parts = line.split(None, 1)
            rest = parts[1] if len(parts) > 1 else "? (?)"
            sym, _, dso = rest.rpartition(" (")
            dso = dso.rstrip(")").rsplit("/", 1)[-1]
            cur[2].append(f"{sym.split('+')[0] or '?'} [{dso}]")
            continue
        # header: "PID/TID TIME: EVENT:"
        head = line.split()
        pid_tid, t = head[0], head[1].rstrip(":")
        pid, _, tid = pid_tid.partition("/")
        if main is None:
            main = pid
        if cur:
            yield cur
        ev = head[2].rstrip(":")
        if tid != main:
            cur = None
            continue
        cur = (float(t), ev, [])
    if cur:
        yield cur


def pct(xs, q):
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    k = keys(sys.argv[2])
    t0 = int(k["storm_mono_start_ns"]) / 1e9
    t1 = int(k["storm_mono_subscribed_ns"]) / 1e9 or t0
    t2 = int(k["storm_mono_end_ns"]) / 1e9
    windows = [("before (2 s)", t0 - 2, t0), ("connect", t0, t1), ("pages", t1, t2)]
    passes = []  # (start, end)
    samples = []  # (time, frames)
    out_at = None
    for t, ev, frames in events(sys.argv[1]):
        if ev.endswith("sys_exit_epoll_wait"):
            out_at = t
        elif ev.endswith("sys_enter_epoll_wait"):
            if out_at is not None:
                passes.append((out_at, t))
            out_at = None
        elif ev == "cpu-clock":
            samples.append((t, frames))
    limit = None
    for name, a, b in windows:
        ps = [(s, e) for s, e in passes if a <= s < b]
        lens = [(e - s) * 1e3 for s, e in ps]
        if limit is None:
            limit = pct(lens, 0.99)
        long = [(s, e) for s, e in ps if (e - s) * 1e3 > limit]
        print(f"## {name}: {b - a:.2f} s, {len(ps)} passes, p50 {pct(lens, 0.5):.2f} ms, "
              f"p99 {pct(lens, 0.99):.2f} ms, max {max(lens, default=0):.2f} ms; "
              f"{len(long)} longer than {limit:.2f} ms, {sum(e - s for s, e in long) * 1e3:.0f} ms in all")
        inside = []
        j = 0
        long.sort()
        for t, frames in samples:
            if not a <= t < b:
                continue
            while j < len(long) and long[j][1] < t:
                j += 1
            if j < len(long) and long[j][0] <= t:
                inside.append(frames)
        if not inside:
            continue
        # cpu-clock samples only while the thread runs: samples / frequency
        # against the passes' wall time says how much of them was waiting
        # for a core rather than working.
        wall = sum(e - s for s, e in long) * 1e3
        print(f"CPU in those passes: about {len(inside) * 1e3 / FREQ:.0f} ms of {wall:.0f} ms "
              f"({100 * len(inside) * 1e3 / FREQ / wall:.0f} %)")
        self_c = collections.Counter(f[0] if f else "?" for f in inside)
        dso_c = collections.Counter(f[0].rpartition(" [")[2] if f else "?" for f in inside)
        incl = collections.Counter()
        for f in inside:
            incl.update(set(f))
        n = len(inside)
        # The longest few, one by one: one kind of work or many?
        for ps_, pe_ in sorted(long, key=lambda x: x[0] - x[1])[:5]:
            fr = [f for t, f in samples if ps_ <= t <= pe_]
            libs = collections.Counter(f[0].rpartition(" [")[2].rstrip("]") if f else "?" for f in fr)
            under = collections.Counter()
            for f in fr:
                under.update({x for x in f if "mosquitto_chat" in x or "leveldb" in x})
            print(f"  pass at +{ps_ - a:.3f} s: {(pe_ - ps_) * 1e3:.1f} ms, {len(fr)} samples; "
                  + ", ".join(f"{lib} {c}" for lib, c in libs.most_common(5)))
            calls = collections.Counter()
            for f in fr:
                calls.update({x.split(" [")[0] for x in f if x.startswith(("__x64_sys_", "__do_sys_"))})
            if calls:
                print("    in system calls: " + ", ".join(f"{x} {c}" for x, c in calls.most_common(6)))
            if under:
                print("    under the plugin/store: "
                      + ", ".join(f"{x.split(' [')[0]} {c}" for x, c in under.most_common(8)))
        print(f"{n} samples in those passes; self, by library:")
        for s, c in dso_c.most_common(8):
            print(f"  {100 * c / n:5.1f} %  [{s}")
        print("self:")
        for s, c in self_c.most_common(15):
            print(f"  {100 * c / n:5.1f} %  {s}")
        print("inclusive:")
        for s, c in incl.most_common(30):
            print(f"  {100 * c / n:5.1f} %  {s}")


if __name__ == "__main__":
    main()
