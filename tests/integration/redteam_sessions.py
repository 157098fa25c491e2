#!/usr/bin/python3
"""redteam_sessions.py: MQTT 5 session cases of integ_redteam on Debian's
python3-paho-mqtt (the Paho C harness has no Clean Start with a session
expiry, nor a short expiry), against the broker on 127.0.0.1:<port>:

  redteam_sessions.py clean_start_expiry <port>
      a device connects with Clean Start 1 and a Session Expiry Interval of
      300 s (its session outlives the connection), subscribes to
      chat/room1, acks message 1 and disconnects; 1,500 messages are sent
      (more than Mosquitto's max_queued_messages); it resumes (Clean Start
      0) and sends `sync`, as the contract asks of persistent sessions, and
      acks every page. Fails (exit 1) if any id comes twice or one is
      missing after 60 s.
  redteam_sessions.py expired_session <port>
      three times: a device with a session expiry of 1 s subscribes and
      disconnects, its session expires (3 s), a new clean connection with
      the same client id subscribes again: a message sent then must reach
      it live. Fails if one does not.

Only loopback; every wait is bounded.
"""
import json
import sys
import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

RESPONSE = "$CONTROL/chat/v1/response"
AWAY = 1500


def fail(why):
    print("redteam_sessions.py: " + why, file=sys.stderr)
    sys.exit(1)


class Device:
    def __init__(self, port, client_id, user, clean_start, expiry, on_message=None):
        self.c = mqtt.Client(client_id=client_id, protocol=mqtt.MQTTv5)
        self.c.username_pw_set(user, user)
        self.connected = threading.Event()
        self.subscribed = threading.Event()
        self.c.on_connect = self._on_connect
        self.c.on_subscribe = lambda cl, ud, mid, codes, props: self.subscribed.set()
        if on_message:
            self.c.on_message = on_message
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = expiry
        self.c.connect("127.0.0.1", port, keepalive=30, clean_start=clean_start, properties=props)
        self.c.loop_start()
        if not self.connected.wait(10):
            fail("no CONNACK for " + client_id)

    def _on_connect(self, cl, ud, flags, rc, props=None):
        if rc != 0:
            fail("CONNACK %s" % rc)
        self.connected.set()

    def subscribe(self, topic):
        self.subscribed.clear()
        self.c.subscribe(topic, qos=1)
        if not self.subscribed.wait(10):
            fail("no SUBACK for " + topic)

    def publish(self, topic, payload):
        self.c.publish(topic, payload, qos=1).wait_for_publish()

    def close(self):
        self.c.disconnect()
        self.c.loop_stop()


def clean_start_expiry(port):
    first = threading.Event()

    def on_first(cl, ud, msg):
        if msg.topic == "chat/room1" and json.loads(msg.payload).get("id") == 1:
            first.set()

    dev = Device(port, "v5-phone", "bob", True, 300, on_first)
    dev.subscribe("chat/room1")
    alice = Device(port, "alice-v5", "alice", True, 0)
    alice.publish("chat/room1", "first")
    if not first.wait(10):
        fail("message 1 never came")
    dev.publish("chat/room1/ack", "1")
    dev.close()
    time.sleep(0.3)
    for i in range(AWAY):
        alice.c.publish("chat/room1", "away %d" % i, qos=1)
    alice.publish("chat/room1", "last")  # PUBACKs come in order: all are stored
    counts = {}
    lock = threading.Lock()
    done = threading.Event()

    def take(i):
        with lock:
            counts[i] = counts.get(i, 0) + 1
            if all(counts.get(k, 0) >= 1 for k in range(2, AWAY + 3)):
                done.set()

    def on_message(cl, ud, msg):
        body = json.loads(msg.payload)
        if msg.topic == "chat/room1":
            take(body["id"])
        elif msg.topic == RESPONSE:
            for e in body.get("responses", []):
                if e.get("command") == "replay":
                    for env in e.get("messages", []):
                        take(env["id"])
                    if e.get("last"):
                        cl.publish("chat/room1/ack", str(e["last"]), qos=0)

    dev = Device(port, "v5-phone", "bob", False, 300, on_message)
    dev.c.publish("$CONTROL/chat/v1", json.dumps({"commands": [{"command": "sync"}]}), qos=1)
    ok = done.wait(60)
    time.sleep(2)  # what else comes
    dev.close()
    alice.close()
    with lock:
        missing = [k for k in range(2, AWAY + 3) if counts.get(k, 0) == 0]
        twice = sum(n - 1 for n in counts.values() if n > 1)
    if not ok or missing or twice:
        fail("%d of %d messages missing, %d came twice" % (len(missing), AWAY + 1, twice))


def expired_session(port):
    alice = Device(port, "alice-v5", "alice", True, 0)
    for attempt in range(3):
        dev = Device(port, "v5-tablet", "bob", False, 1)
        dev.subscribe("chat/room1")
        dev.close()
        time.sleep(3)  # the session expires: Mosquitto tells no plugin
        got = threading.Event()
        text = "live %d" % attempt

        def on_message(cl, ud, msg, text=text):
            if msg.topic == "chat/room1" and text in msg.payload.decode():
                got.set()

        dev = Device(port, "v5-tablet", "bob", True, 0, on_message)
        dev.subscribe("chat/room1")
        alice.publish("chat/room1", text)
        ok = got.wait(5)
        dev.close()
        if not ok:
            fail("attempt %d: a connection that subscribed got no live message (the session of "
                 "its client id had expired before)" % attempt)
    alice.close()


def main():
    if len(sys.argv) != 3:
        fail("usage: redteam_sessions.py clean_start_expiry|expired_session <port>")
    what, port = sys.argv[1], int(sys.argv[2])
    {"clean_start_expiry": clean_start_expiry, "expired_session": expired_session}[what](port)


if __name__ == "__main__":
    main()
