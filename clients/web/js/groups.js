/* groups.js: the member's groups in the Chat (chat.js): a Group per group
 * (its head, the device's cursor, what was shown, the member's read marker,
 * receipts and presence), `sync` for heads and cursors and the newest
 * message of each, subscriptions, joining, opening and closing a group, and
 * the acks: every ack is a read on chat/<group>/read of what was shown in
 * view (protocol v1.1). */
(function (root) {
  'use strict';
  const MqChat = root.MqChat;
  const P = MqChat.proto;
  const Chat = MqChat.Chat;

  const ACK_MS = 300; /* acks of live messages: at most one per group per this */

  class Group {
    constructor(name) {
      this.name = name;
      this.head = 0; /* highest id known to exist */
      this.acked = 0; /* the device's cursor, as last known */
      this.ackSent = 0; /* highest ack published */
      this.seen = 0; /* highest id shown while open and visible */
      this.subscribed = false; /* on this connection */
      this.subscribing = false;
      this.log = null; /* GroupLog once opened */
      this.contextDone = false;
      this.olderDone = false; /* history reached the first kept message */
      this.olderLoading = false;
      this.truncated = false; /* retention removed messages before lo */
      this.catching = false;
      this.catchAgain = false;
      this.ackTimer = null;
      this.gapTimer = null;
      this.newFrom = 0; /* first unread id when the group was opened */
      this.last = null; /* newest message known, for the group list */
      this.member = true;
      /* v1.1 */
      this.members = 0; /* the member count, 0: not known yet */
      this.reads = new Map(); /* member -> highest id read */
      this.online = new Set(); /* members online now */
      this.receiptsKnown = false; /* reads and online were asked for on this connection */
      this.mine = 0; /* the member's own read marker, as pushed or sent */
    }

    /* The member's own read marker (any of its devices). */
    readBy(user) {
      return this.reads.get(user) || 0;
    }

    /* "Read by k of n" for message id of user's: the other members whose
     * marker reached it, of the other members. */
    readCount(id, user) {
      let k = 0;
      for (const [member, read] of this.reads) if (member !== user && read >= id) k++;
      const n = Math.max(0, this.members - 1);
      return { k: Math.min(k, n), n: n };
    }

    get unread() {
      return Math.max(0, this.head - Math.max(this.acked, this.seen, this.mine || 0));
    }
  }

  MqChat.Group = Group;

  Chat.extend({
    group(name) {
      let g = this.groups.get(name);
      if (!g) {
        g = new Group(name);
        this.groups.set(name, g);
      }
      return g;
    },

    list() {
      return [...this.groups.values()].filter((g) => g.member);
    },

    changed() {
      this.emit('groups', {});
    },

    /* sync: heads and cursors of every group of the member. first: also
     * fetch the newest message of each, for the group list. */
    async sync(first) {
      this.applySync(await this.command({ command: 'sync', replay: false }));
      this.changed();
      if (first) await this.previews([...this.groups.values()].filter((g) => g.member && !g.last));
      for (const g of this.groups.values()) {
        if (g.member && g.name !== this.openName && g.acked >= g.head) this.subscribe(g);
      }
      const open = !first && this.openName && this.groups.get(this.openName);
      if (open && open.log && !open.subscribed && !open.catching) this.catchUp(open);
      this.changed();
    },

    applySync(e) {
      const listed = new Set();
      for (const s of e.groups || []) {
        if (typeof s.group !== 'string') continue;
        const g = this.group(s.group);
        listed.add(s.group);
        g.member = true;
        g.head = Math.max(g.head, s.head || 0);
        g.acked = Math.max(g.acked, s.acked || 0);
        g.ackSent = Math.max(g.ackSent, g.acked);
        /* the member's read marker: what it read, or sent, on any device */
        if (Number.isSafeInteger(s.read)) g.mine = Math.max(g.mine || 0, s.read);
      }
      for (const g of this.groups.values()) if (!listed.has(g.name)) g.member = false;
      this.synced = true;
    },

    /* The newest message of each group, one request for all of them. */
    async previews(groups) {
      const list = groups.filter((g) => g.head > 0).slice(0, 200);
      if (list.length === 0) return;
      const entries = await this.request(list.map((g) => ({
        command: 'history', group: g.name, limit: 1,
      })));
      entries.forEach((e, i) => {
        const m = e && !e.error && Array.isArray(e.messages) && P.envelope(e.messages[0]);
        if (m) this.noteLast(list[i], m);
      });
    },

    noteLast(g, m) {
      if (!g.last || m.id > g.last.id) g.last = m;
    },

    subscribe(g) {
      if (g.subscribed || g.subscribing || !this.connected) return Promise.resolve();
      g.subscribing = true;
      const gen = this.gen;
      return new Promise((resolve) => {
        this.client.subscribe(P.groupTopic(g.name), { qos: 1 }, (err, granted) => {
          if (gen !== this.gen) return resolve();
          g.subscribing = false;
          const rc = granted && granted[0] ? granted[0].qos : 0x80;
          if (err || rc >= 0x80) {
            this.emit('error', { group: g.name, message: 'cannot follow ' + g.name });
          } else {
            g.subscribed = true;
          }
          resolve();
        });
      });
    },

    /* Joins a group; one request with a sync, for its cursor. */
    async join(name) {
      const why = P.groupError(name);
      if (why) throw new Error(why);
      const g = this.groups.get(name);
      if (g && g.member) return g;
      const [joined, synced] = await this.request([
        { command: 'join', group: name },
        { command: 'sync', replay: false },
      ]);
      if (!joined || joined.error) throw new Error(joined ? joined.error : 'empty response');
      if (synced && !synced.error) this.applySync(synced);
      const j = this.groups.get(name);
      if (!j || !j.member) throw new Error('not a member of the group');
      this.changed();
      return j;
    },

    /* Opens a group: shows what the page holds of it at once, then (once
     * connected and synced) joins it if needed and catches up on it. */
    async open(name) {
      const prev = this.openName && this.groups.get(this.openName);
      if (prev && prev.name !== name) this.ackNow(prev);
      this.openName = name;
      const g = this.groups.get(name);
      if (g && g.log) {
        const from = Math.max(g.acked, g.seen);
        g.newFrom = g.head > from ? from + 1 : 0;
      }
      this.emit('reset', { group: name });
      this.changed();
      if (this.synced && this.connected) await this.load(name);
    },

    /* The open group's catch-up, also after every reconnect. */
    async load(name) {
      let g = this.groups.get(name);
      try {
        if (!g || !g.member) g = await this.join(name);
      } catch (err) {
        if (this.openName === name) this.emit('error', { group: name, message: err.message });
        return;
      }
      if (this.openName !== name) return;
      if (!g.log) {
        g.log = new MqChat.GroupLog(g.acked);
        g.newFrom = g.head > g.acked ? g.acked + 1 : 0;
        g.olderDone = g.acked === 0;
        this.emit('reset', { group: name });
      }
      this.markRead(g);
      this.changed();
      await this.catchUp(g);
    },

    close() {
      const g = this.openName && this.groups.get(this.openName);
      if (g) this.ackNow(g);
      this.openName = null;
      this.changed();
    },

    reading(g) {
      return g.name === this.openName && this.visible;
    },

    setVisible(v) {
      this.visible = v;
      const g = this.openName && this.groups.get(this.openName);
      if (g && v) {
        this.markRead(g);
        this.changed();
      }
      if (v && this.connected && this.synced) this.sync(false).catch(() => {});
    },

    /* Everything shown of the open group counts as read while visible. */
    markRead(g) {
      if (!this.reading(g) || !g.log) return;
      if (g.log.hi > g.seen) g.seen = g.log.hi;
      this.scheduleAck(g);
    },

    /* ------------------------------------------------------------------
     * Acks
     * ------------------------------------------------------------------ */

    scheduleAck(g) {
      if (g.seen <= g.ackSent || g.ackTimer) return;
      g.ackTimer = setTimeout(() => {
        g.ackTimer = null;
        this.ackNow(g);
      }, ACK_MS);
    },

    ackNow(g) {
      clearTimeout(g.ackTimer);
      g.ackTimer = null;
      const id = g.seen;
      if (id <= g.ackSent || !this.connected) return;
      g.ackSent = id;
      /* Only what was shown in view is acked, so every ack is a read: the
       * read topic moves the member's marker and acks this device. */
      this.client.publish(P.readTopic(g.name), String(id), { qos: 1 }, (err) => {
        if (!err) {
          if (id > g.acked) g.acked = id;
          if (id > g.readBy(this.user)) {
            g.reads.set(this.user, id);
            g.mine = id;
          }
          this.emit('acked', { group: g.name, id: id });
          this.changed();
        } else if (g.ackSent === id) {
          g.ackSent = g.acked;
        }
      });
    },
  });
})(typeof window !== 'undefined' ? window : globalThis);
