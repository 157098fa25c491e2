"""py_duplicate.py: a cid retry from python paho-mqtt (Debian's
python3-paho-mqtt) is acknowledged, answered to its sender as a duplicate,
and delivered to nobody a second time (issue 25, item 7). Run by
integ_python.c (ctest integ_duplicate_paho_python) against a broker it
started: python3 py_duplicate.py <port>.

alice sends {"cid":"py-1",...}; bob, subscribed at QoS 1, gets it as id 1.
alice then sends the same payload again at QoS 1, 2 and 0 over MQTT 3.1.1,
and at QoS 1 over MQTT 5 from her second device: each publish completes
(PUBACK, PUBCOMP; MQTT 5 with a success reason code), each brings her
{"command":"publish","group":"room1","cid":"py-1","id":1,"duplicate":true}
on $CONTROL/chat/v1/response, and after each a fresh message is the next
thing bob receives. Every wait is bounded; the exit status says whether it
passed (0) or why not (1, with a line on stderr).
"""
import json
import queue
import sys

import paho.mqtt.client as mqtt

WAIT_S = 10
GROUP = "room1"
TOPIC = "chat/" + GROUP
RESPONSE = "$CONTROL/chat/v1/response"
RETRY = json.dumps({"cid": "py-1", "body": "hello once"})


def fail(why):
    sys.stderr.write("py_duplicate: FAIL: %s\n" % why)
    sys.exit(1)


class Client:
    """A paho client on its own network thread; messages and acks queued."""

    def __init__(self, port, client_id, username, version=mqtt.MQTTv311):
        self.msgs = queue.Queue()
        self.subacks = queue.Queue()
        self.version = version
        self.c = mqtt.Client(client_id=client_id, protocol=version,
                             clean_session=True if version != mqtt.MQTTv5 else None)
        self.c.username_pw_set(username)
        self.c.on_message = lambda c, u, m: self.msgs.put((m.topic, m.payload.decode()))
        self.c.on_subscribe = lambda c, u, mid, granted, *rest: self.subacks.put(mid)
        self.published = {}
        self.c.on_publish = self.on_publish
        connected = queue.Queue()
        self.c.on_connect = lambda c, u, f, rc, *rest: connected.put(rc)
        self.c.connect("127.0.0.1", port, keepalive=30)
        self.c.loop_start()
        try:
            rc = connected.get(timeout=WAIT_S)
        except queue.Empty:
            fail("%s: no CONNACK" % client_id)
        if rc != 0:
            fail("%s: CONNACK %s" % (client_id, rc))
        self.id = client_id

    def on_publish(self, client, userdata, mid):
        self.published[mid] = True

    def subscribe(self, topic, qos):
        rc, mid = self.c.subscribe(topic, qos)
        if rc != mqtt.MQTT_ERR_SUCCESS:
            fail("%s: subscribe %s: %s" % (self.id, topic, rc))
        try:
            while self.subacks.get(timeout=WAIT_S) != mid:
                pass
        except queue.Empty:
            fail("%s: no SUBACK for %s" % (self.id, topic))

    def publish(self, payload, qos):
        """Publishes and waits for the broker's acknowledgement (QoS 1, 2)
        or for the packet to be written (QoS 0)."""
        info = self.c.publish(TOPIC, payload, qos)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            fail("%s: publish: %s" % (self.id, info.rc))
        info.wait_for_publish(timeout=WAIT_S)
        if not info.is_published():
            fail("%s: the QoS %d publish was not acknowledged" % (self.id, qos))

    def next(self, what):
        """The next message, skipping the reads and presence entries the
        plugin pushes unasked to a member's device subscribed to the
        response topic (protocol v1.2), which come at any time."""
        for _ in range(1000):
            try:
                topic, payload = self.msgs.get(timeout=WAIT_S)
            except queue.Empty:
                fail("%s: nothing received: %s" % (self.id, what))
            if topic == RESPONSE and all(
                    e.get("command") in ("reads", "presence") and "members" not in e
                    for e in json.loads(payload).get("responses", [{}])):
                continue
            return topic, payload
        fail("%s: only pushes received: %s" % (self.id, what))

    def close(self):
        self.c.disconnect()
        self.c.loop_stop()


def expect_duplicate(c):
    """c's next message must be the plugin's answer to its retry."""
    topic, payload = c.next("the answer to a retry")
    if topic != RESPONSE:
        fail("%s: got %s %s, expected the answer to a retry" % (c.id, topic, payload))
    entries = json.loads(payload).get("responses")
    want = {"command": "publish", "group": GROUP, "cid": "py-1", "id": 1, "duplicate": True}
    if entries != [want]:
        fail("%s: the answer to a retry was %s, expected %s" % (c.id, payload, [want]))


def expect_next(bob, n, body):
    """bob's next message is envelope n with body: nothing came between."""
    topic, payload = bob.next("envelope %d" % n)
    env = json.loads(payload) if topic == TOPIC else {}
    if env.get("id") != n or env.get("body") != body:
        fail("bob: expected envelope %d (%s), got %s %s" % (n, body, topic, payload))


def main():
    port = int(sys.argv[1])
    bob = Client(port, "py-bob", "bob")
    bob.subscribe(TOPIC, 1)
    alice = Client(port, "py-alice", "alice")
    alice.subscribe(RESPONSE, 1)

    alice.publish(RETRY, 1)
    expect_next(bob, 1, "hello once")
    n = 1
    for qos in (1, 2, 0):
        alice.publish(RETRY, qos)
        expect_duplicate(alice)
        n += 1
        alice.publish(json.dumps({"body": "after the QoS %d retry" % qos}), 1)
        expect_next(bob, n, "after the QoS %d retry" % qos)

    # MQTT 5, from alice's second device: the same member, the same cid.
    alice5 = Client(port, "py-alice-5", "alice", mqtt.MQTTv5)
    alice5.subscribe(RESPONSE, 1)
    alice5.publish(RETRY, 1)
    expect_duplicate(alice5)
    n += 1
    alice5.publish(json.dumps({"body": "after the MQTT 5 retry"}), 1)
    expect_next(bob, n, "after the MQTT 5 retry")

    for c in (alice, alice5, bob):
        c.close()
    print("py_duplicate: 4 retries acknowledged, answered as duplicates of #1, "
          "none delivered again")


if __name__ == "__main__":
    main()
