#!/usr/bin/python3
"""persistent_once.py: a persistent-session device on Debian's python3-paho-mqtt,
for integ_access_persistent_once (issue 21.7), in two steps the C test runs:

  persistent_once.py subscribe <port> <client id>
      connects with clean_session=False, subscribes to chat/room1, sends the
      group's first message and waits for it to come back (id 1: the
      subscription is live), acks it and disconnects;
  persistent_once.py resume <port> <client id> <first> <last>
      connects again with clean_session=False (the session resumes: no
      subscribe), sends `sync` as the contract asks of such a device, and
      takes every message from the live topic and the replay pages, acking
      each page, until it holds first..last; fails (exit 1) if any id came
      twice, or if they do not all come within 60 s.

Only loopback; every wait is bounded.
"""
import json
import sys
import threading

import paho.mqtt.client as mqtt

RESPONSE = "$CONTROL/chat/v1/response"
TIMEOUT = 60.0


def fail(why):
    print("persistent_once.py: " + why, file=sys.stderr)
    sys.exit(1)


def client(port, client_id, on_message):
    c = mqtt.Client(client_id=client_id, clean_session=False, protocol=mqtt.MQTTv311)
    c.username_pw_set("bob", "bob")
    # Before the connect: on 2.1 the catch-up starts at the broker's
    # connect event, so its first page may come with the CONNACK.
    c.on_message = on_message
    connected = threading.Event()
    c.on_connect = lambda cl, ud, flags, rc: connected.set() if rc == 0 else fail("CONNACK %d" % rc)
    c.connect("127.0.0.1", port, keepalive=30)
    c.loop_start()
    if not connected.wait(10):
        fail("no CONNACK")
    return c


def subscribe(port, client_id):
    got = threading.Event()

    def on_message(cl, ud, msg):
        if msg.topic == "chat/room1" and json.loads(msg.payload).get("id") == 1:
            got.set()

    c = client(port, client_id, on_message)
    subscribed = threading.Event()
    c.on_subscribe = lambda cl, ud, mid, granted: subscribed.set()
    result, mid = c.subscribe("chat/room1", qos=1)
    if result != mqtt.MQTT_ERR_SUCCESS or not subscribed.wait(10):
        fail("subscribe: %d" % result)
    c.publish("chat/room1", "first", qos=1)
    if not got.wait(TIMEOUT):
        fail("message 1 never came")
    c.publish("chat/room1/ack", "1", qos=1).wait_for_publish()
    c.disconnect()
    c.loop_stop()


def resume(port, client_id, first, last):
    counts = {}
    lock = threading.Lock()
    done = threading.Event()
    synced = threading.Event()

    def take(env):
        i = env.get("id")
        with lock:
            counts[i] = counts.get(i, 0) + 1
            if all(counts.get(k, 0) >= 1 for k in range(first, last + 1)):
                done.set()

    def on_message(cl, ud, msg):
        try:
            data = json.loads(msg.payload)
        except ValueError:
            return
        if msg.topic == "chat/room1":
            take(data)
        elif msg.topic == RESPONSE:
            for entry in data.get("responses", []):
                if entry.get("command") == "sync":
                    synced.set()
                if entry.get("command") == "replay" and entry.get("group") == "room1":
                    for env in entry.get("messages", []):
                        take(env)
                    cl.publish("chat/room1/ack", str(entry["last"]), qos=0)

    c = client(port, client_id, on_message)
    c.publish("$CONTROL/chat/v1", json.dumps({"commands": [{"command": "sync"}]}), qos=1)
    if not done.wait(TIMEOUT):
        with lock:
            missing = [k for k in range(first, last + 1) if k not in counts]
        fail("%d of %d messages missing, first %s" % (len(missing), last - first + 1, missing[:5]))
    # An ack at QoS 1 after the last page, then a request: its answer comes
    # after anything the broker had queued for this client before it, so
    # once it is here nothing more can come.
    c.publish("chat/room1/ack", str(last), qos=1).wait_for_publish()
    synced.clear()
    c.publish("$CONTROL/chat/v1", json.dumps({"commands": [{"command": "sync", "replay": False}]}),
              qos=1)
    if not synced.wait(10):
        fail("no answer to the last sync")
    with lock:
        twice = {k: n for k, n in counts.items() if n > 1}
    c.disconnect()
    c.loop_stop()
    if twice:
        fail("%d ids came more than once, e.g. %s" % (len(twice), sorted(twice.items())[:5]))
    print("each of %d messages once" % (last - first + 1))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "subscribe":
        subscribe(int(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) >= 6 and sys.argv[1] == "resume":
        resume(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        fail("usage: persistent_once.py subscribe|resume <port> <client id> [first last]")


if __name__ == "__main__":
    main()
