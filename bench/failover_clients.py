#!/usr/bin/python3
"""failover_clients.py: the chat clients of bench/failover (issue 23,
item 5), and the checks on what they saw.

Publishers and subscribers on both brokers, MQTT 5 and QoS 1 (python3-paho-mqtt,
Debian's 1.6): every publish carries a cid and is retried with it until a
PUBACK with reason 0 (a refusal is reason 0x87 with an error entry); every
subscriber records each envelope it gets live. The driver (bench/failover)
kills the database primary once `ready` exists and writes the kill's time
(epoch ms) into `killed`; this program runs until, after that, every
publisher has had `--after` acks and every subscriber has had `--after`
live messages sent after the kill from each broker, then reads the whole
group back with `history` through each broker, checks, prints one line of
figures (key=value) and exits 0 when every check holds, 1 otherwise.

Checks:
- every acknowledged cid is in the group's history, once, on both brokers;
- the history's ids are 1..head, each once, and both brokers' histories are
  the same; every id delivered live carries the cid the history has for it
  (an id given twice would show here as two cids for one id);
- every subscriber got, live, every acknowledged message but those whose
  answer the broker lost (a retry answered `duplicate`: the broker that
  stored it never learnt it did, and the subscribers of that broker get it
  by catch-up; see docs/protocol.md, A retry) and those acknowledged at
  most LIVE_WINDOW_MS before the kill and no later than the last ack before
  the outage (delivered as the database went, their delivery's read check
  could not reach it: refused, fail closed; they are in the history, and a
  device reads them by catch-up or fetch);
  figures.json lists each with its id and ack time;
- every publisher was acked after the kill, every subscriber got messages
  from both brokers after it (live delivery resumed, no broker restarted).

Every wait is bounded (--deadline-s for the whole run).
"""

import argparse
import json
import os
import sys
import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

RESPONSE = "$CONTROL/chat/v1/response"
REQUEST = "$CONTROL/chat/v1"
# How long before the kill a message may have been acknowledged and still
# be refused live on the other broker (see the check).
LIVE_WINDOW_MS = 2000


def now_ms():
    return int(time.time() * 1000)


class ReasonClient(mqtt.Client):
    """paho 1.6 calls on_publish without the PUBACK's reason code: keep it
    per packet id before the library drops it."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.reasons = {}

    def _handle_pubackcomp(self, cmd):
        pkt = self._in_packet["packet"]
        if len(pkt) >= 2:
            mid = int.from_bytes(pkt[:2], "big")
            self.reasons[mid] = pkt[2] if len(pkt) > 2 else 0
        return super()._handle_pubackcomp(cmd)


def connect(cid, port, on_message=None):
    c = ReasonClient(client_id=cid, protocol=mqtt.MQTTv5)
    up = threading.Event()
    c.on_connect = lambda cl, ud, fl, rc, pr=None: up.set() if rc == 0 else None
    if on_message:
        c.on_message = on_message
    props = Properties(PacketTypes.CONNECT)
    props.SessionExpiryInterval = 0
    c.connect("127.0.0.1", port, keepalive=30, clean_start=True, properties=props)
    c.loop_start()
    if not up.wait(10):
        raise SystemExit(f"failover_clients: {cid} could not connect to {port}")
    return c


class Publisher:
    def __init__(self, name, broker, port, group, rate, stop):
        self.name, self.broker, self.group, self.stop = name, broker, group, stop
        self.gap = 1.0 / rate
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.pending = {}  # mid -> True once answered
        self.acked = {}  # cid -> ack time (ms)
        self.refused = 0  # answers with a reason >= 0x80
        self.unanswered = 0  # waits of 10 s without an answer
        self.refused_during = []  # (cid, time) of refusals
        self.duplicates = {}  # cid -> id, retries the store already had
        self.c = connect(name, port, self.on_message)
        self.c.on_publish = self.on_publish
        self.thread = threading.Thread(target=self.run, daemon=True)

    def on_message(self, cl, ud, msg):
        if msg.topic != RESPONSE:
            return
        try:
            for e in json.loads(msg.payload).get("responses", []):
                if e.get("command") == "publish" and e.get("duplicate"):
                    with self.lock:
                        self.duplicates[e["cid"]] = e["id"]
        except (ValueError, KeyError, TypeError):
            pass

    def on_publish(self, cl, ud, mid):
        with self.lock:
            self.pending[mid] = True
            self.cond.notify_all()

    def run(self):
        n = 0
        while not self.stop.is_set():
            n += 1
            cid = f"{self.name}-{n}"
            body = json.dumps({"cid": cid, "body": f"{self.name} message {n}"})
            t0 = time.monotonic()
            while not self.stop.is_set():
                t0 = time.monotonic()
                info = self.c.publish(f"chat/{self.group}", body, qos=1)
                with self.lock:
                    self.cond.wait_for(lambda: self.pending.get(info.mid), timeout=10)
                    answered = self.pending.pop(info.mid, False)
                reason = self.c.reasons.pop(info.mid, None)
                if answered and (reason or 0) < 0x80:
                    with self.lock:
                        self.acked[cid] = now_ms()
                    break
                with self.lock:
                    if answered:
                        self.refused += 1
                        self.refused_during.append((cid, now_ms()))
                    else:
                        self.unanswered += 1
                time.sleep(0.05)  # then the same cid again
            left = self.gap - (time.monotonic() - t0)
            if left > 0:
                time.sleep(left)


class Subscriber:
    def __init__(self, name, broker, port, groups):
        self.name, self.broker = name, broker
        self.topics = {f"chat/{g}" for g in groups}
        self.lock = threading.Lock()
        self.live = {}  # (group, id) -> (cid, receive time ms)
        self.twice = 0  # the same id delivered live again
        subbed = threading.Event()
        self.c = connect(name, port, self.on_message)
        self.c.on_subscribe = lambda *a: subbed.set()
        self.c.subscribe([(t, 1) for t in sorted(self.topics)])
        if not subbed.wait(10):
            raise SystemExit(f"failover_clients: {name} got no SUBACK")

    def on_message(self, cl, ud, msg):
        if msg.topic not in self.topics:
            return
        env = json.loads(msg.payload)
        key = (env["group"], env["id"])
        with self.lock:
            if key in self.live:
                self.twice += 1
            self.live[key] = (env.get("cid"), now_ms())


def history(port, group, name):
    """Every message of the group, read through the broker on port with
    `history` pages (newest first): {id: cid}, and the head."""
    box = {"q": []}
    ev = threading.Event()

    def on_message(cl, ud, msg):
        if msg.topic == RESPONSE:
            for e in json.loads(msg.payload).get("responses", []):
                if e.get("command") == "history":
                    box["q"].append(e)
                    ev.set()

    c = connect(name, port, on_message)
    subbed = threading.Event()
    c.on_subscribe = lambda *a: subbed.set()
    c.subscribe(f"chat/{group}", qos=1)  # joins the open group
    subbed.wait(10)
    out, head, before = {}, None, None
    for _ in range(100000):
        cmd = {"command": "history", "group": group, "limit": 1000}
        if before is not None:
            cmd["before"] = before
        ev.clear()
        box["q"].clear()
        c.publish(REQUEST, json.dumps({"commands": [cmd]}), qos=1)
        if not ev.wait(15):
            raise SystemExit(f"failover_clients: no history answer from {port}")
        e = box["q"][0]
        if "error" in e:
            raise SystemExit(f"failover_clients: history on {port}: {e['error']}")
        head = e["head"] if head is None else head
        msgs = e.get("messages", [])
        for m in msgs:
            if m["id"] in out:
                out.setdefault("__dup__", []).append(m["id"])
            out[m["id"]] = m.get("cid")
        if not e.get("more") or not msgs:
            break
        before = min(m["id"] for m in msgs)
    c.disconnect()
    c.loop_stop()
    return out, head


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ports", required=True, help="broker A's port,broker B's port")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--groups", default="failover1,failover2",
                    help="publisher i of each broker publishes to group i modulo their number")
    ap.add_argument("--pubs", type=int, default=2, help="publishers per broker")
    ap.add_argument("--subs", type=int, default=2, help="subscribers per broker")
    ap.add_argument("--rate", type=float, default=50, help="publishes per second per publisher")
    ap.add_argument("--before", type=int, default=100, help="acks per publisher before the kill")
    ap.add_argument("--after", type=int, default=100, help="acks per publisher after it")
    ap.add_argument("--deadline-s", type=float, default=150)
    a = ap.parse_args()
    ports = dict(zip("AB", (int(p) for p in a.ports.split(","))))
    deadline = time.monotonic() + a.deadline_s
    stop = threading.Event()

    groups = a.groups.split(",")
    subs = [Subscriber(f"sub{b}{i}", b, ports[b], groups) for b in "AB" for i in range(a.subs)]
    pubs = [
        Publisher(f"pub{b}{i}", b, ports[b], groups[i % len(groups)], a.rate, stop)
        for b in "AB"
        for i in range(a.pubs)
    ]
    for p in pubs:
        p.thread.start()

    def acks_after(p, t):
        with p.lock:
            return sum(1 for v in p.acked.values() if v > t)

    def fail(why):
        stop.set()
        print(f"failover_clients: FAIL {why}", flush=True)
        sys.exit(1)

    killed_path = os.path.join(a.dir, "killed")
    ready = False
    kill_ms = None
    while True:
        if time.monotonic() > deadline:
            fail(
                "deadline: acks after the kill per publisher "
                + str([acks_after(p, kill_ms or 0) for p in pubs])
            )
        if not ready and all(len(p.acked) >= a.before for p in pubs):
            open(os.path.join(a.dir, "ready"), "w").close()
            ready = True
        if kill_ms is None and os.path.exists(killed_path):
            with open(killed_path) as f:
                txt = f.read().strip()
            if txt:
                kill_ms = int(txt)
        if kill_ms is not None and all(acks_after(p, kill_ms) >= a.after for p in pubs):
            done = True
            for s in subs:
                with s.lock:
                    for b in "AB":
                        names = {f"pub{b}{i}" for i in range(a.pubs)}
                        n = sum(
                            1
                            for cid, t in s.live.values()
                            if t > kill_ms and cid and cid.rsplit("-", 1)[0] in names
                        )
                        done = done and n >= a.after
            if done:
                break
        time.sleep(0.1)
    stop.set()
    for p in pubs:
        p.thread.join(15)
    acked = {}
    dup_answers = {}
    pub_group = {p.name: p.group for p in pubs}
    for p in pubs:
        acked.update(p.acked)
        dup_answers.update(p.duplicates)

    # Let live delivery drain: every subscriber has every acked message, or
    # 10 s passed (what is missing then is counted below).
    end = time.monotonic() + 10
    while time.monotonic() < end:
        with_all = True
        for s in subs:
            with s.lock:
                got = {cid for cid, _ in s.live.values()}
            with_all = with_all and all(c in got or c in dup_answers for c in acked)
        if with_all:
            break
        time.sleep(0.1)

    problems = []
    store = {}  # (group, id) -> cid, as broker A's history gives it
    heads = {}
    for g in groups:
        hist = {}
        for b in "AB":
            h, head = history(ports[b], g, f"reader{b}-{g}")
            if "__dup__" in h:
                problems.append(f"{g} via {b}: history gave ids twice: {h['__dup__'][:5]}")
                del h["__dup__"]
            hist[b] = h
            ids = sorted(h)
            if ids != list(range(1, len(ids) + 1)) or head != len(ids):
                problems.append(f"{g} via {b}: ids not dense 1..head (head {head}, {len(ids)} ids)")
            cids = list(h.values())
            if len(set(cids)) != len(cids):
                problems.append(f"{g} via {b}: a cid stored twice")
            want = [c for c, _ in acked.items() if pub_group[c.rsplit("-", 1)[0]] == g]
            missing = [c for c in want if c not in set(cids)]
            if missing:
                problems.append(
                    f"{g} via {b}: {len(missing)} acknowledged messages lost, e.g. {missing[:5]}"
                )
            heads[g] = head
        if hist["A"] != hist["B"]:
            problems.append(f"{g}: the two brokers' histories differ")
        store.update({(g, i): c for i, c in hist["A"].items()})
    # The outage: the last ack before the kill, the first after it, over all publishers.
    times = sorted(acked.values())
    before = [t for t in times if t <= kill_ms]
    after = [t for t in times if t > kill_ms]
    # an ack moments after the kill may answer a commit made before it: the
    # outage is the largest gap between acks from the kill on
    gaps = [(b2 - b1, b1, b2) for b1, b2 in zip(times, times[1:]) if b2 > kill_ms]
    gap, g0, g1 = max(gaps) if gaps else (0, 0, 0)
    by_cid = {c: key for key, c in store.items()}
    live_missing = {}
    for s in subs:
        with s.lock:
            live = dict(s.live)
        if s.twice:
            problems.append(f"{s.name}: {s.twice} ids delivered live twice")
        for key, (cid, _) in live.items():
            if store.get(key) != cid:
                problems.append(f"{s.name}: live {key} carried {cid}, the store has {store.get(key)}")
                break
        got = {cid for cid, _ in live.values()}
        miss = [c for c in acked if c not in got]
        live_missing[s.name] = [
            (c, by_cid.get(c), acked[c] - kill_ms, c in dup_answers) for c in miss
        ]
        # A message relayed from the other broker in the instant the
        # database went (its listener had read it, the read check of its
        # delivery could not ask the database) is refused live, fail
        # closed: the device reads it by catch-up or fetch (the gap in its
        # ids says so). Any other missing delivery is a failure.
        unexplained = [
            c
            for c in miss
            if c not in dup_answers and not (kill_ms - LIVE_WINDOW_MS <= acked[c] <= g0)
        ]
        if unexplained:
            problems.append(
                f"{s.name}: {len(unexplained)} acked messages never delivered live, e.g. {unexplained[:5]}"
            )
    for p in pubs:
        if acks_after(p, kill_ms) < a.after:
            problems.append(f"{p.name}: too few acks after the kill")

    per_broker = {}
    for b in "AB":
        ts = sorted(t for p in pubs if p.broker == b for t in p.acked.values())
        bg = [(y - x, x, y) for x, y in zip(ts, ts[1:]) if y > kill_ms]
        per_broker[b] = max(bg)[0] if bg else 0
    fig = {
        "acked": len(acked),
        "stored": len(store),
        "heads": "/".join(str(heads[g]) for g in groups),
        "acked_before_kill": len(before),
        "acked_after_kill": len(after),
        "outage_ms": gap,
        "last_ack_before_ms": g0 - kill_ms,
        "first_ack_after_ms": g1 - kill_ms,
        "outage_A_ms": per_broker["A"],
        "outage_B_ms": per_broker["B"],
        "refused": sum(p.refused for p in pubs),
        "unanswered": sum(p.unanswered for p in pubs),
        "duplicate_answers": len(dup_answers),
        "stored_not_acked": len(store) - len([c for c in store.values() if c in acked]),
        "live_missing_max": max(len(v) for v in live_missing.values()),
        "live_missing_at_kill": max(sum(1 for x in v if not x[3]) for v in live_missing.values()),
        "problems": len(problems),
    }
    print(" ".join(f"{k}={v}" for k, v in fig.items()), flush=True)
    with open(os.path.join(a.dir, "figures.json"), "w") as f:
        json.dump({"figures": fig, "problems": problems, "live_missing": live_missing}, f, indent=1)
    for p in problems:
        print(f"failover_clients: FAIL {p}", flush=True)
    for c in subs + pubs:
        c.c.disconnect()
        c.c.loop_stop()
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
