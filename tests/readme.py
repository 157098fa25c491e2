"""readme.py: README.md's command blocks, run as written and checked against
what the text around them says they print (issue 25, item 1).

Run by tests/run_path.sh (the `run` stage) once `scripts/run --port P` runs
in a fresh copy of the checkout: the tour (mosquitto_pub/sub/rr, then
mqchat) goes to that broker, on its fresh store; the blocks about a broker
with the package installed (see it working, operating it) go to a second
broker started here from the same build, configured as the README says
(the package's snippet, a password_file, an admin) on another free port.
Every command is the block's own text, with `-p <port>` added where it
names 127.0.0.1 or runs mqchat, build/clients/mqchat and mqchat taken from
the copy's build, and /var/backups/mosquitto-chat a directory of this test.
Never port 1883.

Each ```sh block of the README must be one this test knows, in order
(BLOCKS below): a block it does not know fails the test, so that a new
example gets run (or says why it cannot run unattended: the package's
install, which the package stage tests; PostgreSQL's own cluster; the
benchmarks). What the README shows as output (the plain ``` block after a
command block, a `# ...` comment after a command, a `...` in backticks in
the text) is compared with what the command printed: "..." matches any
text, a 13-digit time any time.

  python3 tests/readme.py --root <checkout> --port <mqtt port> --work <dir>

Exit status 0: passed; 1: failed (the reason on stderr). Every wait is
bounded; every process started here is stopped by its pid.
"""
import argparse
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

WAIT_S = 20
PROCS = []


def log(*a):
    print("[readme %s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def fail(why):
    log("FAIL:", why)
    for p in PROCS:
        if p.poll() is None:
            p.kill()
    sys.exit(1)


# ---------------------------------------------------------------------------
# The README
# ---------------------------------------------------------------------------

def sections(text):
    """The README as a list of ("sh", lines) command blocks, ("out", lines)
    output blocks and ("text", lines) prose between them."""
    out, kind, cur = [], "text", []
    for line in text.split("\n"):
        m = re.match(r"^```(\w*)\s*$", line)
        if m and kind == "text":
            out.append(("text", cur))
            kind, cur = ("sh" if m.group(1) == "sh" else "out" if m.group(1) == "" else "other"), []
        elif m and line.strip() == "```":
            out.append((kind, cur))
            kind, cur = "text", []
        else:
            cur.append(line)
    out.append((kind, cur))
    return out


def commands(lines):
    """The commands of a block: continuation lines joined; comment-only
    lines kept apart as ("#", text)."""
    out, cur = [], ""
    for line in lines:
        if not cur and line.startswith("#"):
            out.append(("#", line[1:].strip()))
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        if cur.strip():
            out.append(("$", cur.strip()))
        cur = ""
    return out


def split_comment(cmd):
    """A command and its trailing comment (a # outside quotes, after a
    blank)."""
    in_single = in_double = False
    for i, ch in enumerate(cmd):
        if ch == "'" and not in_double:
            in_single = not in_single
        elif ch == '"' and not in_single:
            in_double = not in_double
        elif ch == "#" and not in_single and not in_double and (i == 0 or cmd[i - 1] == " "):
            return cmd[:i].rstrip(), cmd[i + 1:].strip()
    return cmd, None


def pattern(shown):
    """A regular expression for a line the README shows: '...' is any text,
    a 13-digit number any time, the rest as written."""
    parts = re.split(r"(\.\.\.|\b\d{13}\b)", shown)
    rx = "".join(".*" if p == "..." else r"\d{13}" if re.fullmatch(r"\d{13}", p)
                 else re.escape(p) for p in parts)
    return re.compile("^" + rx + "$")


# ---------------------------------------------------------------------------
# Running commands
# ---------------------------------------------------------------------------

class Env:
    def __init__(self, a):
        self.root = a.root
        self.port = a.port
        self.work = a.work
        self.mqchat = os.path.join(a.root, "build/clients/mqchat")
        self.env = dict(os.environ, HOME=os.path.join(a.work, "home"),
                        XDG_STATE_HOME=os.path.join(a.work, "state"),
                        ADMIN_PW="readme-admin-pw")
        os.makedirs(self.env["HOME"], exist_ok=True)
        self.backups = os.path.join(a.work, "backups")
        self.port2 = None

    def rewrite(self, cmd, port):
        """The command as the README writes it, pointed at port."""
        cmd = cmd.replace("-h 127.0.0.1", "-h 127.0.0.1 -p %d" % port)
        cmd = re.sub(r"(^|\| |; )(build/clients/)?mqchat ", lambda m: "%s%s -p %d " % (
            m.group(1), shlex.quote(self.mqchat), port), cmd)
        return cmd.replace("/var/backups/mosquitto-chat", self.backups)

    def run(self, cmd, port, timeout=WAIT_S, ok=(0,)):
        full = self.rewrite(cmd, port)
        try:
            r = subprocess.run(["bash", "-c", full], cwd=self.root, env=self.env,
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            fail("no end within %d s: %s" % (timeout, full))
        if r.returncode not in ok:
            fail("exit status %d: %s\nstdout: %s\nstderr: %s" % (r.returncode, full, r.stdout,
                                                                  r.stderr))
        return r.stdout, r.stderr

    def start(self, cmd, port, name):
        full = self.rewrite(cmd, port)
        out = open(os.path.join(self.work, name + ".out"), "w")
        err = open(os.path.join(self.work, name + ".err"), "w")
        p = subprocess.Popen(["bash", "-c", "exec " + full], cwd=self.root, env=self.env,
                             stdout=out, stderr=err, start_new_session=True)
        PROCS.append(p)
        p.name = name
        return p

    def read(self, name, ext="out"):
        with open(os.path.join(self.work, name + "." + ext)) as f:
            return f.read()

    def wait_file(self, name, pred, what):
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if pred(self.read(name)):
                return
            time.sleep(0.05)
        fail("%s: not within %d s; it printed:\n%s" % (what, WAIT_S, self.read(name)))


def stop(p, sig=signal.SIGINT):
    """Ctrl-C, as the README says; must end within WAIT_S."""
    if p.poll() is None:
        os.killpg(p.pid, sig)
    try:
        p.wait(WAIT_S)
    except subprocess.TimeoutExpired:
        fail("%s did not stop on signal %d" % (p.name, sig))


def expect_lines(got, shown, what):
    if len(got) != len(shown) or not all(pattern(s).match(g) for g, s in zip(got, shown)):
        fail("%s printed\n  %s\nwhere the README shows\n  %s" % (
            what, "\n  ".join(got), "\n  ".join(shown)))


def in_text(text, needle, what):
    if needle not in text:
        fail("the README no longer says %s (%s): update tests/readme.py" % (needle, what))


# ---------------------------------------------------------------------------
# The second broker: one with the package's snippet, as installed
# ---------------------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def installed_broker(e, admins):
    """A broker configured as README's "Install" says: the package's
    snippet (plugin, store, backup_dir), anonymous clients let in as
    Debian's broker without listeners does; with admins, what "Operating
    it" adds: a password_file with the admin, plugin_opt_admins. On the
    same port and store each time."""
    os.makedirs(e.backups, exist_ok=True)
    pw = os.path.join(e.work, "passwd")
    subprocess.run(["mosquitto_passwd", "-c", "-b", pw, "admin", e.env["ADMIN_PW"]], check=True,
                   capture_output=True)
    os.chmod(pw, 0o644)
    for attempt in range(5):
        port = e.port2 or free_port()
        conf = os.path.join(e.work, "installed.conf")
        with open(conf, "w") as f:
            f.write("\n".join([
                "listener %d 127.0.0.1" % port, "allow_anonymous true",
                "sys_interval 1", "log_dest file " + os.path.join(e.work, "installed.log")] +
                (["password_file " + pw] if admins else []) + [
                "plugin " + os.path.join(e.root, "build/plugin/mosquitto_chat.so"),
                "plugin_opt_db_path " + os.path.join(e.work, "installed.db"),
                "plugin_opt_backup_dir " + e.backups] +
                (["plugin_opt_admins admin"] if admins else []) +
                ["set_tcp_nodelay true"] + (["user root"] if os.getuid() == 0 else [])) + "\n")
        p = subprocess.Popen(["mosquitto", "-c", conf], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        p.name = "the second broker"
        PROCS.append(p)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and p.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                e.port2 = port
                log("second broker (as installed) on 127.0.0.1:%d" % port)
                return p
            except OSError:
                time.sleep(0.05)
        if p.poll() is None:
            p.kill()
    fail("the second broker did not start")


# ---------------------------------------------------------------------------
# The blocks, in the README's order
# ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    if a.port == 1883:
        fail("not on 1883: it may be someone's broker")
    e = Env(a)
    text = open(os.path.join(a.root, "README.md")).read()
    secs = sections(text)
    blocks = [(i, c) for i, (k, c) in enumerate(secs) if k == "sh"]

    def after(i, kind):
        """The next section of kind after section i, if it comes before the
        next command block."""
        for k, c in secs[i + 1:]:
            if k == kind:
                return c
            if k == "sh":
                return None
        return None

    def prose_after(i):
        return " ".join(secs[i + 1][1]) if i + 1 < len(secs) else ""

    def prose_before(i):
        return " ".join(secs[i - 1][1]) if i > 0 else ""

    def member_of(group, port, member="bob"):
        """Waits until member is in group: its subscriber's subscribe (which
        joins) went through, so that what is sent next reaches it. Asked
        with sync without replay, from a device of its own, which writes
        nothing."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            out, _ = e.run("mqchat -u %s unread" % member, port, ok=(0, 1, 3))
            if re.search(r"^%s: " % re.escape(group), out, re.M):
                return
            time.sleep(0.1)
        fail("%s never became a member of %s" % (member, group))

    P = a.port
    state = {}

    def b_scripts(i, cmds):
        log("skipped: scripts/run runs this test; scripts/test is CI")

    def b_sub_bob(i, cmds):
        state["bob"] = e.start(cmds[0][1], P, "bob-sub")
        time.sleep(0)  # the subscription: awaited below by the messages' arrival

    def b_pub(i, cmds):
        # bob's subscribe must have gone through before alice sends
        member_of("room1", P)
        for _, c in cmds:
            e.run(c, P)
        shown = after(i, "out")
        e.wait_file("bob-sub", lambda t: len([l for l in t.splitlines()
                                              if l.startswith("chat/room1 ")]) >= len(shown),
                    "bob's subscriber")
        stop(state["bob"])
        expect_lines(e.read("bob-sub").splitlines(), shown, "bob's mosquitto_sub")
        log("bob's subscriber printed the two envelopes the README shows")

    def b_run(i, cmds):
        for _, c in cmds:
            e.run(c, P)

    def b_replay(i, cmds):
        out, err = e.run(cmds[0][1], P, timeout=15, ok=(27,))
        in_text(prose_before(i), "`Timed out`", "mosquitto_sub -W")
        if "Timed out" not in err:
            fail("mosquitto_sub -W 3 did not say Timed out: %s" % err)
        expect_lines(out.splitlines(), after(i, "out"), "bob's catch-up")
        log("bob's subscribe printed the replay page the README shows")

    def b_rr(i, cmds):
        out, _ = e.run(cmds[0][1], P)
        expect_lines(out.splitlines(), after(i, "out"), "mosquitto_rr")
        log("mosquitto_rr printed the sync and history the README shows")

    def b_listen(i, cmds):
        state["listen"] = e.start(cmds[0][1], P, "bob-listen")
        state["listen_cmd"] = cmds[0][1]
        member_of("team", P)

    def b_send(i, cmds):
        for _, c in cmds:
            e.run(c, P)
        shown = ["[team #1] alice: hello bob", "[team #2] alice: lunch at noon?"]
        for s in shown:
            in_text(prose_after(i), "`%s`" % s, "what bob sees")
        e.wait_file("bob-listen", lambda t: t.count("\n") >= 2, "bob's mqchat listen")
        expect_lines(e.read("bob-listen").splitlines(), shown, "bob's mqchat listen")

    def b_who(i, cmds):
        # bob marks what he printed read within a moment: ask until he has
        deadline = time.monotonic() + WAIT_S
        for kind, c in cmds:
            if kind != "$":
                continue
            c, comment = split_comment(c)
            shown = [comment] if comment else [x for k, x in cmds if k == "#"]
            while True:
                out, _ = e.run(c, P)
                got = out.splitlines()
                if len(got) == len(shown) and all(pattern(s).match(g) for g, s in zip(got, shown)):
                    break
                if time.monotonic() > deadline:
                    expect_lines(got, shown, c)
                time.sleep(0.1)
        log("who and receipts printed what the README shows")

    def b_change(i, cmds):
        for _, c in cmds:
            c, comment = split_comment(c)
            out, _ = e.run(c, P)
            if comment and comment not in out.splitlines():
                fail("%s printed\n%s\nwithout the line the README shows: %s" % (c, out, comment))
        shown = ["[team #3] alice recalled #1", "[team #2] alice: lunch at one? (edited)"]
        for s in shown:
            in_text(prose_before(i), "`%s`" % s, "what bob's listener shows")
        e.wait_file("bob-listen", lambda t: t.count("\n") >= 4, "bob's mqchat listen")
        got = e.read("bob-listen").splitlines()[2:]
        expect_lines(got, shown, "bob's mqchat listen after the recall and the edit")
        log("bob's listener showed the recall and the edit the README shows")

    def b_unread(i, cmds):
        stop(state["listen"])  # "Stop him (Ctrl-C)"
        for _, c in cmds:
            c, comment = split_comment(c)
            out, _ = e.run(c, P, timeout=60)
            if comment and comment not in out.splitlines():
                fail("%s printed\n%s\nwithout the line the README shows: %s" % (c, out, comment))
        # "Start bob's listener again": what the text says of it
        text = prose_after(i)
        in_text(text, "`mqchat: team: caught up at #454 (450 messages, 5 pages)`", "the catch-up")
        in_text(text, "`[team #5] alice:\nmissed 1`".replace("\n", " "), "the first line")
        p = e.start(state["listen_cmd"], P, "bob-listen2")
        e.wait_file("bob-listen2", lambda t: "[team #454] alice: missed 450\n" in t,
                    "bob's second listen")
        stop(p)
        out, err = e.read("bob-listen2"), e.read("bob-listen2", "err")
        if not out.startswith("[team #5] alice: missed 1\n") or out.count("\n") != 450:
            fail("bob's second listen printed %d lines from %r" % (out.count("\n"), out[:40]))
        if "mqchat: team: caught up at #454 (450 messages, 5 pages)" not in err:
            fail("bob's second listen said:\n%s" % err)
        log("450 unread, then caught up in 5 pages from #5, nothing twice")

    def b_package(i, cmds):
        log("skipped: building and installing the package (the package stage)")
        state["installed"] = installed_broker(e, admins=False)

    def b_see_it(i, cmds):
        sub = e.start(cmds[0][1], e.port2, "see-sub")
        member_of("room1", e.port2)
        e.run(cmds[1][1], e.port2)
        shown = re.search(r"`(chat/room1 \{[^`]*\})`", prose_before(i))
        if not shown:
            fail("the README no longer shows what the subscriber prints")
        e.wait_file("see-sub", lambda t: "chat/room1 " in t, "the subscriber")
        stop(sub)
        expect_lines(e.read("see-sub").splitlines(), [shown.group(1)], "the subscriber")
        log("see it working: the subscriber printed the envelope the README shows")

    def b_watch(i, cmds):
        # "Name the admins in the broker's configuration": restarted so.
        stop(state["installed"], signal.SIGTERM)
        state["installed"] = installed_broker(e, admins=True)
        out, _ = e.run(cmds[0][1], e.port2, timeout=30)
        lines = out.splitlines()
        if len(lines) != 10 or not all(l.startswith("$SYS/broker/chat/") for l in lines):
            fail("the figures: %s" % out)
        c, comment = split_comment(cmds[1][1])
        out, _ = e.run(c, e.port2)
        if re.sub(" +", " ", comment) not in [re.sub(" +", " ", l) for l in out.splitlines()]:
            fail("%s printed\n%s\nwithout %s" % (c, out, comment))
        log("the ten figures, and admin stats' line the README shows")

    def b_backup(i, cmds):
        c, comment = split_comment(cmds[0][1])
        out, _ = e.run(c, e.port2, timeout=60)
        got = out.strip().replace(e.backups, "/var/backups/mosquitto-chat")
        shown = re.sub(r"\d{8}T\d{6}Z", "TIME", comment)
        shown = re.sub(r"\(\d+ records\)", "(N records)", shown)
        got = re.sub(r"\d{8}T\d{6}Z", "TIME", got)
        got = re.sub(r"\(\d+ records\)", "(N records)", got)
        if got != shown:
            fail("backup printed %s, where the README shows %s" % (out, comment))
        log("backup written where the README says")

    def b_inspect(i, cmds):
        for _, c in cmds:
            c, _ = split_comment(c)
            out, _ = e.run(c, e.port2)
            if c.startswith("mosquitto_rr"):
                # An admin reads any group's history without joining it.
                try:
                    entry = json.loads(out)["responses"][0]
                except (ValueError, KeyError, IndexError):
                    fail("%s printed %s" % (c, out))
                if entry.get("command") != "history" or "error" in entry or \
                        not entry.get("messages"):
                    fail("the admin's history of room1: %s" % out)
                continue
            if "room1" not in out and "MEMBER" not in out:
                fail("%s printed %s" % (c, out))
        log("admin groups, members and history answer")

    def b_skip(why):
        return lambda i, cmds: log("skipped:", why)

    BLOCKS = [
        (r"^scripts/run +#", b_scripts),
        (r"^mosquitto_sub -h 127.0.0.1 -i bob -q 1 -t chat/room1 -v$", b_sub_bob),
        (r"^mosquitto_pub .*'hello bob'", b_pub),
        (r"^mosquitto_pub .*chat/room1/ack -m 2$", b_run),
        (r"^for i in 1 2 3; do mosquitto_pub", b_run),
        (r"^mosquitto_sub .* -W 3$", b_replay),
        (r"^mosquitto_rr ", b_rr),
        (r"^build/clients/mqchat -u bob listen team$", b_listen),
        (r"^build/clients/mqchat -u alice send team 'hello bob'$", b_send),
        (r"^build/clients/mqchat -u alice who team", b_who),
        (r"^build/clients/mqchat -u alice recall team 1 ", b_change),
        (r"^seq -f 'missed %g' 450", b_unread),
        (r"^cmake -S \. -B build", b_package),
        (r"^mosquitto_sub -h 127.0.0.1 -i bob -q 1 -t chat/room1 -v$", b_see_it),
        (r"^mosquitto_sub .*\$SYS", b_watch),
        (r"^mqchat -u admin -P \"\$ADMIN_PW\" admin backup", b_backup),
        (r"^mqchat -u admin -P \"\$ADMIN_PW\" admin groups", b_inspect),
        (r"^sudo pg_ctlcluster", b_skip("the system's own PostgreSQL cluster and sudo "
                                        "(tests/pg runs several brokers on clusters of its own)")),
        (r"^bench/run ", b_skip("the benchmarks take minutes (the bench stage runs --smoke)")),
    ]
    if len(blocks) != len(BLOCKS):
        fail("README.md has %d command blocks, this test knows %d: teach it the new ones" % (
            len(blocks), len(BLOCKS)))
    try:
        for n, ((i, lines), (rx, handler)) in enumerate(zip(blocks, BLOCKS), 1):
            cmds = commands(lines)
            first = cmds[0][1] if cmds else ""
            if not re.search(rx, first):
                fail("README command block %d starts with %r, where this test expects %s" % (
                    n, first, rx))
            handler(i, cmds)
    finally:
        for p in PROCS:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
    log("passed: %d command blocks of README.md" % len(blocks))


if __name__ == "__main__":
    main()
