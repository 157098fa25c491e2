/* outbox.js: sending in the Chat (chat.js). Each message keeps its cid
 * until the broker stored it, so every retry (MQTT.js's after a reconnect,
 * ours after a reload) is stored once; unsent messages are kept in
 * localStorage and go again with their cid after a reload. A message is
 * done when its stored envelope comes back (`delivered`), or when the
 * plugin says a retry was stored before (`storedBefore`: it then sends the
 * envelope to nobody live). */
(function (root) {
  'use strict';
  const MqChat = root.MqChat;
  const P = MqChat.proto;
  const Chat = MqChat.Chat;

  const GAP_MS = Chat.GAP_MS;
  const OUTBOX_KEY = 'mqchat.outbox.';

  Chat.extend({
    send(group, body) {
      const e = {
        group: group,
        cid: this.cidBase + '-' + ++this.cidSeq,
        body: body,
        state: 'pending', /* pending, sending, stored, failed */
        at: Date.now(),
      };
      this.outbox.push(e);
      this.saveOutbox();
      this.emit('outbox', { group: group });
      this.publishEntry(e);
      return e;
    },

    publishEntry(e) {
      if (!this.connected || e.state === 'sending') return;
      e.state = 'sending';
      e.reason = '';
      const gen = this.gen;
      this.client.publish(P.groupTopic(e.group), P.outgoing(e.body, e.cid), { qos: 1 }, (err) => {
        if (!this.outbox.includes(e)) return;
        if (!err) {
          e.state = 'stored';
          this.saveOutbox();
          /* The envelope comes live; if it does not (see docs/protocol.md on
           * the incoming quota), the gap fetch brings it. */
          const g = this.groups.get(e.group);
          if (g && g.log) setTimeout(() => this.outbox.includes(e) && this.catchUp(g), GAP_MS);
        } else if (err.code >= 0x80) {
          e.state = 'failed';
          e.reason = e.reason || 'refused by the broker';
        } else {
          e.state = gen === this.gen && this.connected ? 'failed' : 'pending';
          e.reason = err.message;
        }
        this.emit('outbox', { group: e.group });
      });
    },

    flushOutbox() {
      for (const e of this.outbox) if (e.state === 'pending') this.publishEntry(e);
    },

    retry(cid) {
      const e = this.outbox.find((x) => x.cid === cid);
      if (!e) return;
      e.state = 'pending';
      this.emit('outbox', { group: e.group });
      this.publishEntry(e);
    },

    discard(cid) {
      const e = this.outbox.find((x) => x.cid === cid);
      if (!e) return;
      this.outbox.splice(this.outbox.indexOf(e), 1);
      this.saveOutbox();
      this.emit('outbox', { group: e.group });
    },

    delivered(cid) {
      const i = this.outbox.findIndex((x) => x.cid === cid);
      if (i < 0) return;
      const e = this.outbox[i];
      this.outbox.splice(i, 1);
      this.saveOutbox();
      this.emit('outbox', { group: e.group });
    },

    /* The broker had stored this cid already (a retry after a lost
     * acknowledgement): the message is sent, and its envelope (id e.id) is
     * not delivered live a second time, so a page that has not shown it
     * fetches it. */
    storedBefore(e) {
      const g = typeof e.group === 'string' ? this.groups.get(e.group) : null;
      if (g && Number.isSafeInteger(e.id) && e.id > 0) {
        g.head = Math.max(g.head, e.id);
        if (g.log && g.log.hi < e.id) this.catchUp(g);
      }
      if (typeof e.cid === 'string') this.delivered(e.cid);
    },

    refused(cid, reason) {
      const e = typeof cid === 'string' && this.outbox.find((x) => x.cid === cid);
      if (!e) {
        if (reason) this.emit('error', { message: reason });
        return;
      }
      e.state = 'failed';
      e.reason = reason || 'refused by the broker';
      this.emit('outbox', { group: e.group });
    },

    pendingFor(group) {
      return this.outbox.filter((e) => e.group === group);
    },

    /* Unsent messages survive a reload: they go again with their cid. */
    loadOutbox() {
      try {
        const list = JSON.parse(localStorage.getItem(OUTBOX_KEY + this.user) || '[]');
        return list
          .filter((e) => e && typeof e.cid === 'string' && typeof e.group === 'string')
          .map((e) => ({ group: e.group, cid: e.cid, body: String(e.body), state: 'pending', at: e.at }));
      } catch (err) {
        return [];
      }
    },

    saveOutbox() {
      const keep = this.outbox
        .filter((e) => e.state !== 'stored')
        .map((e) => ({ group: e.group, cid: e.cid, body: e.body, at: e.at }));
      try {
        if (keep.length) localStorage.setItem(OUTBOX_KEY + this.user, JSON.stringify(keep));
        else localStorage.removeItem(OUTBOX_KEY + this.user);
      } catch (err) {
        /* storage full or disabled: the outbox lives for this page only */
      }
    },
  });
})(typeof window !== 'undefined' ? window : globalThis);
