#!/usr/bin/env python3
# Writes the seed corpus of each fuzz target into fuzz/corpus/<target>/: the
# bad inputs of the integration tests, good neighbours of each, and the cases
# of the unit tests. Besides the lists below, it reads the tests themselves:
# every JSON text (a string literal, after concatenation and the #defines,
# that starts with { or [) and topic in tests/integration/integ_bad*.[ch]
# and integ_sec*.c, and every case of bad_options.sh, so that a bad input
# added there is a seed once this runs again. One small file per input,
# named by its content's hash, so that running this again changes nothing.
#
#   fuzz/seeds.py           write the corpus (after adding inputs here or
#                           to those tests); commit the result
#   fuzz/seeds.py --check   exit 1, naming them, if the committed corpus
#                           lacks a seed this would write (the fuzz stage)
import glob
import hashlib
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CHECK = sys.argv[1:] == ["--check"]
seeds = {}  # target -> {file name: bytes}


def write(target, data):
    """Adds a seed; the files are written (or checked) at the end."""
    if isinstance(data, str):
        data = data.encode()
    seeds.setdefault(target, {})[hashlib.sha1(data).hexdigest()[:16]] = data


# ------------------------------------------------- the integration tests' own
C_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", '"': b'"', "'": b"'",
             "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v", "?": b"?"}


def c_unescape(s):
    out, i = bytearray(), 0
    while i < len(s):
        if s[i] != "\\":
            out += s[i].encode()
            i += 1
        elif s[i + 1] in "xX":
            m = re.match(r"[0-9a-fA-F]{1,2}", s[i + 2:])
            out.append(int(m.group(), 16))
            i += 2 + len(m.group())
        elif s[i + 1] in "01234567":
            m = re.match(r"[0-7]{1,3}", s[i + 1:])
            out.append(int(m.group(), 8))
            i += 1 + len(m.group())
        else:
            out += C_ESCAPES[s[i + 1]]
            i += 2
    return bytes(out)


TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*|\s+|.', re.S)


def c_strings(text, macros):
    """The string literals of C text, adjacent ones and macros joined."""
    text = re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))
    out, cur = [], None
    for m in TOKEN.finditer(text):
        t = m.group()
        if t.isspace():
            continue
        if t.startswith('"'):
            v = c_unescape(t[1:-1])
        elif t in macros:
            v = macros[t]
        else:
            if cur is not None:
                out.append(cur)
            cur = None
            continue
        cur = v if cur is None else cur + v
    if cur is not None:
        out.append(cur)
    return out


def integration_inputs():
    """JSON texts and topics of the bad-input and security tests."""
    paths = sorted(glob.glob(os.path.join(ROOT, "tests/integration/integ_bad*.[ch]")) +
                   glob.glob(os.path.join(ROOT, "tests/integration/integ_sec*.[ch]")))
    texts = [open(p, encoding="utf-8").read() for p in paths]
    macros = {}
    for text in texts:
        for m in re.finditer(r'#define\s+([A-Z_][A-Z0-9_]*)\s+(".*)', text):
            strings = c_strings(m.group(2), macros)
            if strings:
                macros[m.group(1)] = strings[0]
    json, topics = set(), set()
    for text in texts:
        for s in c_strings(text, macros):
            if b"%" in s:
                continue  # a format: its instances are in the lists below
            if s[:1] in (b"{", b"["):
                json.add(s)
            elif s.startswith(b"chat/") or s.startswith(b"$CONTROL/"):
                topics.add(s)
    return sorted(json), sorted(topics)


def options_tested():
    """The cases of tests/integration/bad_options.sh's loop."""
    text = open(os.path.join(ROOT, "tests/integration/bad_options.sh"), encoding="utf-8").read()
    loop = re.search(r"for case in (.*?); do", text, re.S).group(1)
    return re.findall(r'"([^"]*)"', loop)


G = "room1"

# ---------------------------------------------------------------- envelope
envelope = [
    "hello", "", "42", "[1]", '"x"', "null", "{", '{"a":}', "{}x", "{} {}",
    "line\nbreak\t\x01", "caf\u00e9 \u2615", "a\\u0000b",
    "{}", '{"body":"hi"}', '{"body":"hi","cid":"a-1"}',
    '{"id":99,"body":"b","group":"x","from":"mallory","ts":1,"z":[1, 2]}',
    ' {\n "a" : { "b" : [ true , null ] } ,\r\n\t"c":-1.5e3 } \n',
    '{"ids":1,"Id":2,"i":3,"froms":4}', '{"a":1,"a":2}', '{"body":"x\\u0000y"}',
    '{"s":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00"}',
    # refusals
    '{"cid":5}', '{"cid":""}', '{"cid":null}', '{"cid":"' + "0" * 65 + '"}',
    '{"cid":"' + "d" * 64 + '","body":"sixty-four"}',
    '{"id":1,"id":2}', '{"group":1,"x":0,"group":2}', '{"from":1,"from":2}',
    '{"ts":1,"ts":2}', '{"cid":"a","cid":"b"}', '{"cid":"a","\\u0063id":"b"}',
    '{"a":"\\u0000","b":"\ufdd0"}', '{"a":"\\u0000\\uFDD0"}', '{"a":"\\u0000\\ufdd0"}',
    '{"cid":"a-1","body":"which one?","cid":"a-2"}',
    # escaped keys
    '{"\\u0069d":5,"b":1}', '{"\\u0074s":5}', '{"c\\u0069d":"x","body":"y"}',
    '{"a\\"b":1}', '{"a\\u0000b":"c\\u0000"}', '{"\\u00e9":1}',
    # numbers, unicode, nesting
    '{"n":12345678901234567890}', '{"n":9007199254740993}', '{"n":1e400}',
    '{"n":-1e400,"m":[1e999]}', '{"n":1e-400}', '{"n":-0}', '{"n":0.1}',
    '{"n":1E+2,"m":1e-2}', '{"u":"\\ud83d\\ude00\U0001F600"}',
    '{"u":"\u2028\u2029\uffff"}', '{"u":"\ufdd0"}', '{"z":"\\\\u0000"}',
    '{"a":{"b":{"c":[[[[[]]]]]}}}', '{"a":"","":""}', '{"a":true,"b":false,"c":null}',
    '{"a":' + "[" * 999 + "]" * 999 + "}",
    # what cJSON reads although it is not JSON
    "\ufeff{\"body\":\"after a byte order mark\"}", '\x0b{"a":1}', '{\x0b"a":1}',
    '{"a":1,\x0c"b":2}', '{"a":1\x01,"b":2}', '{"a":[1,\x1f 2]}', '{"body":"a\tb"}',
    '{"n":01}', '{"n":-01.5}', '{"n":1.}', '{"n":-.5}', '{"n":1.e5}',
    # integration tests: payloads that are not UTF-8, or fine
    b"\xff\xfe", b"abc\x00def", b"\xc0\xaf", b"\xed\xa0\x80", b"ok \xe2\x82",
    b"\xf4\x90\x80\x80", b'{"body":"\xff","cid":"c-1"}',
    "let me in", '{"cid":"e-1","body":"hi"}', '{"body":"' + "z" * 200 + '","cid":"big-1"}',
    "y" * 300, '{"body":"acknowledged and kept"}', '{"cid":"c25","body":"m25"}',
    '{"body":"' + "0" * 280 + '"}',
]
IT_JSON, IT_TOPICS = integration_inputs()
# the integration tests' JSON texts: requests to control, the rest (payloads,
# forged answers) here
envelope += [t for t in IT_JSON if b"command" not in t]
for p in envelope:
    write("envelope", p)

# ----------------------------------------------------------------- control
# The first byte: who asks and how (fuzz_control.c): 1 a username, 2 the
# admin, 4 a Response Topic (8: an invalid one), 16 Correlation Data, 32
# behind other access checkers (64: which deny), 128 closed groups.
def req(*commands):
    return '{"commands":[' + ",".join(commands) + "]}"


def cmd(name, **fields):
    parts = ['"command":"%s"' % name] + ['"%s":%s' % (k, v) for k, v in fields.items()]
    return "{" + ",".join(parts) + "}"


g = '"%s"' % G
control = [
    # malformed, not an object, commands
    '{"commands":[', "hello", "{'commands':[]}", '{"commands":[{"command":"sync"},]}',
    "{commands:[]}", '{"commands":[{"command":"sync","replay":false}]} and more',
    '{"commands":[]}{"commands":[]}', "", b"\xff\xfe{}", b'{"commands":[]}\x00',
    "[]", '[{"command":"sync"}]', "42", '"commands"', "null", "true",
    "{}", '{"command":"sync"}', '{"Commands":[{"command":"sync"}]}',
    '{"commands":{"command":"sync"}}', '{"commands":"sync"}', '{"commands":null}',
    '{"commands":1}', '{"commands":[]}',
    # unknown commands
    req(cmd("frobnicate")), req(cmd("SYNC")), req(cmd("")), req(cmd("replay", group=g)),
    req(cmd("sync", replay="false"), cmd("nope", group=g), cmd("history", group=g, limit=1)),
    # fields
    req("{}"), req("42"), req('{"command":7}'), req(cmd("join")), req(cmd("fetch")),
    req(cmd("leave", group=5)), req(cmd("fetch", group="null")),
    req(cmd("history", group="[%s]" % g)), req(cmd("ack", id=1)), req(cmd("ack", group=g)),
    req(cmd("ack", group=g, id='"3"')), req(cmd("sync", replay='"false"')),
    req(cmd("sync", replay=0)), req(cmd("join", group=g, member=5)),
    req(cmd("join", group=g, member='""')),
    req(cmd("leave", group=g, member='"' + "m" * 1025 + '"')),
    req(cmd("fetch", group=g, limit='"10"')), req(cmd("fetch", group=g, after="null")),
    req(cmd("history", group=g, before="true")),
    req(cmd("sync", correlationData='"' + "c" * 257 + '"')),
    req(cmd("sync", correlationData="5")), req(cmd("frob", correlationData='"x"')),
    # good commands
    req(cmd("sync")), req(cmd("sync", replay="false")), req(cmd("sync", after='"room1"')),
    req(cmd("sync", after="5")), req(cmd("join", group=g)), req(cmd("leave", group=g)),
    req(cmd("join", group=g, member='"bob"')), req(cmd("leave", group=g, member='"bob"')),
    req(cmd("ack", group=g, id=3)), req(cmd("ack", group=g, id=9007199254740991)),
    req(cmd("fetch", group=g)), req(cmd("fetch", group=g, after=0, limit=1)),
    req(cmd("fetch", group=g, after=9007199254740991)),
    req(cmd("history", group=g, before=1)),
    req(cmd("history", group=g, before=9007199254740991, limit=9007199254740991)),
    req(cmd("history", group='"caf\u00e9"', limit=2, correlationData='"h-1"')),
    req(cmd("fetch", group='"room2"', correlationData='"f-1"'), cmd("sync", correlationData='"s"')),
    req(cmd("history", group='"' + "h" * 128 + '"')),
    req(cmd("fetch", group='"' + "g" * 129 + '"')),
    b'{"commands":[{"command":"fetch","group":"\xc3\x28"}]}',
    req(cmd("sync"), cmd("sync")), req(cmd("join", group='"fat"')),
    # the admins' commands (the admin is "admin": flags byte 2)
    req(cmd("groups")), req(cmd("groups", after='"room1"', limit=1)),
    req(cmd("groups", limit=0)), req(cmd("groups", limit=1001)),
    req(cmd("members", group=g)), req(cmd("members", group=g, after='"alice"', limit=1)),
    req(cmd("members")), req(cmd("stats")), req(cmd("delete", group='"room2"')),
    req(cmd("delete")), req(cmd("compact")), req(cmd("backup")),
    # recall and edit (v1.2)
    req(cmd("recall", group=g, id=1)), req(cmd("recall", group=g)), req(cmd("recall", id=1)),
    req(cmd("recall", group=g, id=0)), req(cmd("recall", group=g, id=9007199254740991)),
    req(cmd("edit", group=g, id=1, body='"fixed"')), req(cmd("edit", group=g, id=1)),
    req(cmd("edit", group=g, id=1, body='"a"', x="[1,{}]", cid='"c"', recalled="true")),
    req(cmd("edit", group=g, id=1, body='"a"', body2='"b"')),
    req(cmd("edit", group=g, id=1, body="null", correlationData='"e-1"')),
    req(cmd("recall", group=g, id=1), cmd("recall", group=g, id=1), cmd("edit", group=g, id=2,
                                                                        body='"x"')),
    req(*[cmd("history", group=g, limit=1)] * 50),
    req(*[cmd("fetch", group=g, after=0)] * 20),
]
# numbers: each field, each bad value
for command, field in [("fetch", "limit"), ("fetch", "after"), ("history", "limit"),
                       ("history", "before"), ("ack", "id")]:
    for v in ["-1", "0", "-0.5", "1.5", "9007199254740992", "18446744073709551616", "1e300",
              '"5"', "[5]"]:
        control.append(req(cmd(command, group=g, **{field: v})))
# group names
for gj in ['""', '"a/b"', '"a+b"', '"a#b"', '"$a"', '"a\\u0001b"', '"a\\tb"', '"a\\nb"',
           '"a\\u007fb"', '"a\\u0085b"', '"room1\\u0000x"']:
    for c in ["fetch", "join"]:
        control.append(req(cmd(c, group=gj)))
control += [t for t in IT_JSON if b"command" in t]
flag_sets = [0, 1, 2, 1 | 4, 1 | 4 | 8, 1 | 16, 1 | 4 | 16, 1 | 32, 1 | 32 | 64, 2 | 128, 128,
             1 | 128]
for i, p in enumerate(control):
    if isinstance(p, str):
        p = p.encode()
    # every request once as a plain member, and a few under other flags
    write("control", bytes([1]) + p)
    write("control", bytes([flag_sets[i % len(flag_sets)]]) + p)

# --------------------------------------------------------------------- ack
acks = ["abc", "", " ", "1.5", "0x10", "+5", "-1", "1e3", "5 5", "\u0663",
        "12345678901234567890", "999999", "1\n", "3", "0", "9999999999999999999",
        "00000000000000000001", "\t\r\n7 \r\n", "5\x0b", '{"id":5}', b"\xff"]
for a in acks:
    write("ack", a)

# ------------------------------------------------------------------- names
group_names = ["room1", "caf\u00e9 \u2615", "", "a/b", "a+b", "#", "$SYS", "tab\there", "del\x7f",
               "c1\u0085", b"bad\xc3", "h" * 128, "g" * 129, b"a\x00b", b"\xed\xa0\x80",
               "\U0001F600"]
for n in group_names:
    write("names", b"\x00" + (n.encode() if isinstance(n, str) else n))
json_texts = ["{}", "[]", ' {"a" : [1, -2.5e+3, 0, -0, true, false, null, ""]}\r\n',
              '"\\ud800"', '"\\ud83d\\ude00"', "01", "1.", "-.5", "[1,]", '{"a":1,}',
              "\ufeff{}", "\x0b{}", '"a\tb"', '"\\x"', '"\\u12g4"', "[" * 100 + "]" * 100,
              "[" * 4096 + "]" * 4096, "tru", "nul", "1e", "1e+"]
for t in json_texts:
    write("names", b"\x01" + t.encode())
topics = ["chat/room1", "chat/room1/ack", "chat/", "chat/a$b", "chat/a$b/ack",
          "chat/" + "g" * 129, "chat/" + "g" * 129 + "/ack", "chat/room1/x", "chat/room1/",
          "chat//ack", "$share/g/chat/room1", "$share/g", "chat/+", "chat/#", "chat/+/ack", "#",
          "+/room1", "$CONTROL/chat/v1", "$CONTROL/chat/v1/response", "$CONTROL/chat/",
          "chatter/room1", "chat", "private/payroll", "chat/caf\u00e9", "chat/elsewhere/ack"]
topics = [t.encode() for t in topics] + IT_TOPICS
for t in topics:
    write("names", b"\x02" + t)
    write("names", b"\x0a" + t)  # behind other access checkers
for m in [b"alice\x00dev1", b"\x00dev1", b"~bob\x00dev1", b"\x00~x", b"\x00", b"u" * 1025,
          b"\x00" + b"i" * 1024, b"\x00" + b"i" * 1023]:
    write("names", b"\x03" + m)

# ------------------------------------------------------------------ config
# bad_options.sh's cases, then more
bad_options = options_tested() + [
    "db_path", "page_size", "page_size 18446744073709551616", "pg_conninfo", "store",
    "store LevelDB", "store postgresql\npg_conninfo"]
good_options = ["page_size 7", "db_path /var/lib/mosquitto/chat\ntopic_prefix team",
                "admins a, b ,,c\nadmins admin", "fsync batch\nreplay false\nopen_groups false",
                "acl defer\nread_check members", "acl allow", "acl auto",
                "device_expiry_days 30\nbackup_dir /var/backups/chat", "device_expiry_days 1000001",
                "backup_dir relative", "backup_dir", "store leveldb",
                "store postgresql\npg_conninfo host=127.0.0.1 port=5432 dbname=chat",
                "pg_conninfo dbname=chat\nstore leveldb",
                "retention_count 9223372036854775807\nretention_days 1000000",
                "page_bytes 268369920\nmax_payload 44000000\nreplay_window 64\n"
                "replay_timeout 86400\npage_qos 2", "topic_prefix " + "p" * 128,
                "recall_seconds 0\nedit_seconds 31536000"]
for i, o in enumerate(bad_options + good_options):
    write("config", bytes([i % 32]) + o.encode())
    write("config", bytes([(i * 7) % 32]) + o.encode())

bad = 0
for target, files in sorted(seeds.items()):
    d = os.path.join(HERE, "corpus", target)
    have = set(os.listdir(d)) if os.path.isdir(d) else set()
    if CHECK:
        for name in sorted(set(files) - have):
            print("fuzz/seeds.py: corpus/%s lacks %s: %r" % (target, name, files[name][:100]),
                  file=sys.stderr)
        for name in sorted(have - set(files)):
            print("fuzz/seeds.py: corpus/%s/%s is not a seed of this script" % (target, name),
                  file=sys.stderr)
        bad += len(set(files) ^ have)
        continue
    # The whole corpus again: what the lists no longer hold goes.
    os.makedirs(d, exist_ok=True)
    for name in have - set(files):
        os.remove(os.path.join(d, name))
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
if bad:
    print("fuzz/seeds.py: run fuzz/seeds.py and commit fuzz/corpus/", file=sys.stderr)
    sys.exit(1)
if not CHECK:
    print("seeds written to", os.path.join(HERE, "corpus"), file=sys.stderr)
