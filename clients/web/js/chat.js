/* chat.js: the page's chat client on MQTT.js (MQTT 5 over WebSockets): one
 * connection per tab, the member's groups with unread counts, the open
 * group's messages, acks and the outbox. No DOM: it emits events that ui.js
 * renders.
 *
 * How it uses the protocol (docs/web.md says why):
 *   1. Every connection is a clean session. After CONNACK: `sync` with
 *      "replay": false (heads, cursors, unread counts; nothing pushed).
 *   2. Subscriptions: chat/<group> for the open group, and for every group
 *      whose cursor is at its head (new messages then arrive live and raise
 *      the count; a subscribe there makes the plugin replay nothing). A group
 *      with a backlog that is not open stays unsubscribed: a subscribe would
 *      make the plugin push its whole backlog, and push it again every
 *      replay_timeout until acked. Its count comes from `sync`, repeated
 *      every SYNC_MS and when the tab becomes visible.
 *   3. Opening a group: one `history` page before the cursor for context,
 *      then `fetch` pages from the cursor until `more` is false, acking
 *      after each page; then the subscribe (after the acks, so the plugin
 *      replays at most what arrived meanwhile).
 *   4. Replay pages the plugin pushes anyway are pages like fetch's. Every
 *      id is shown once, in order (seq.js); a gap left open GAP_MS is
 *      fetched.
 *   5. Reads: the highest id shown with no gap below it, while the group is
 *      open and the tab visible, at most every ACK_MS, and after each page,
 *      on chat/<group>/read: the member's read marker, which acks the
 *      device too (protocol v1.1).
 *   6. Requests carry MQTT 5 Correlation Data; responses without it (replay
 *      pages, errors about publishes, pushes) are dispatched by their
 *      "command".
 *   7. Read receipts and presence (v1.1): the open group's `receipts` and
 *      `presence` are asked for once it is subscribed (after every
 *      connect); then the plugin pushes `reads` and `presence` entries for
 *      every subscribed group, which keep the group's reads and online up
 *      to date. A group's unread count counts from the member's own read
 *      marker too, so reading on another device clears it here.
 *
 * One Chat object; its jobs are in one file each, loaded in this order
 * after seq.js (index.html): this file (the connection, requests and
 * their responses, entries nobody asked for), groups.js (the groups'
 * state, sync, subscriptions, acks), messages.js (catch-up, pages, gaps,
 * history), receipts.js (read receipts and presence), outbox.js (sending).
 * Each adds its methods with Chat.extend. */
(function (root) {
  'use strict';
  const MqChat = (root.MqChat = root.MqChat || {});
  const P = MqChat.proto;

  const GAP_MS = 1500; /* a gap no replay filled in this long is fetched */
  const SYNC_MS = 30000; /* unread counts of unsubscribed groups */
  const REQUEST_MS = 10000; /* a request without a response fails after this */
  const RECONNECT_MIN_MS = 1000;
  const RECONNECT_MAX_MS = 16000;

  /* The first pause after a lost connection, drawn evenly from 0.5-1.5 s:
   * pages that lost the broker together (a restart, a network blip) come
   * back over a second, not all in one pass of its loop (docs/scaling.md,
   * "Reconnect storms"). */
  function firstPause() {
    return Math.round(RECONNECT_MIN_MS * (0.5 + Math.random()));
  }

  function randomId(n) {
    const a = new Uint8Array(n);
    crypto.getRandomValues(a);
    return Array.from(a, (b) => (b % 36).toString(36)).join('');
  }

  class Chat extends EventTarget {
    /* opts: url, user, password, clientId, mqtt (MQTT.js) */
    constructor(opts) {
      super();
      this.opts = opts;
      this.user = opts.user;
      this.groups = new Map();
      this.openName = null;
      this.visible = true;
      this.client = null;
      this.gen = 0; /* connection generation: flows of an old one stop */
      this.pending = new Map(); /* correlation -> {resolve, reject, timer} */
      this.reqSeq = 0;
      this.attempt = 0;
      this.state = 'connecting';
      this.syncTimer = null;
      this.synced = false;
      this.cidBase = randomId(8);
      this.cidSeq = 0;
      this.fetchLimit = 25; /* messages per fetch, see learnSize */
      this.outbox = this.loadOutbox();
    }

    emit(type, detail) {
      this.dispatchEvent(new CustomEvent(type, { detail: detail }));
    }

    setState(state, detail) {
      this.state = state;
      this.emit('status', { state: state, detail: detail, attempt: this.attempt });
    }

    /* ------------------------------------------------------------------
     * Connection
     * ------------------------------------------------------------------ */

    start() {
      const o = this.opts;
      this.setState('connecting');
      this.client = o.mqtt.connect(o.url, {
        protocolVersion: 5,
        clientId: o.clientId,
        username: o.user,
        password: o.password || undefined,
        clean: true,
        keepalive: 30,
        connectTimeout: 10000,
        reconnectPeriod: firstPause(),
        resubscribe: false, /* subscriptions follow the catch-up (see above) */
        queueQoSZero: false, /* requests are never sent late, out of context */
      });
      /* After stop() (or a refusal) the client may still report a CONNACK
       * or a close that was under way: those are no longer this Chat's. The
       * handlers stay on, so that a late 'error' has a listener. */
      const c = this.client;
      const ours = (f) => (...a) => {
        if (this.client === c) f(...a);
      };
      c.on('connect', ours(() => this.onConnect()));
      c.on('close', ours(() => this.onClose()));
      c.on('reconnect', ours(() => this.onReconnecting()));
      c.on('error', ours((err) => this.onError(err)));
      c.on('message', ours((topic, payload, packet) => this.onMessage(topic, payload, packet)));
    }

    stop() {
      for (const g of this.groups.values()) {
        this.ackNow(g);
        clearTimeout(g.gapTimer);
        g.gapTimer = null;
      }
      clearInterval(this.syncTimer);
      if (this.client) this.client.end(false);
      this.client = null;
      this.gen++; /* the catch-ups under way stop */
      this.failPending(new Error('signed out'));
    }

    get connected() {
      return !!(this.client && this.client.connected);
    }

    onConnect() {
      this.gen++;
      this.attempt = 0;
      this.client.options.reconnectPeriod = firstPause();
      for (const g of this.groups.values()) {
        g.subscribed = g.subscribing = g.receiptsKnown = false;
        g.online.clear(); /* pushes come again to subscribed groups only */
      }
      this.setState('online');
      /* PROTOCOL.md v1.2: the reads and presence pushes go to a device
       * subscribed to the response topic itself; before the groups are,
       * so that the pushes their subscriptions start find it subscribed. */
      this.client.subscribe(P.RESPONSE, { qos: 1 });
      const gen = this.gen;
      this.sync(true)
        .then(() => {
          if (gen !== this.gen) return;
          this.flushOutbox();
          if (this.openName) return this.load(this.openName);
        })
        .catch((err) => this.emit('error', { message: 'sync failed: ' + err.message }));
      clearInterval(this.syncTimer);
      this.syncTimer = setInterval(() => {
        if (this.connected && this.visible) this.sync(false).catch(() => {});
      }, SYNC_MS);
    }

    onClose() {
      this.failPending(new Error('connection lost'));
      /* Who is online is unknown while this page is not: nothing is
       * pushed to it, and it must not show a room as it last saw it. */
      for (const g of this.groups.values()) {
        g.subscribed = g.subscribing = g.receiptsKnown = false;
        g.online.clear();
        this.emit('presence', { group: g.name });
      }
      if (this.state === 'refused' || !this.client) return;
      /* MQTT.js reconnects on its own; back off up to RECONNECT_MAX_MS. */
      if (this.state === 'online') this.setState('reconnecting');
    }

    onReconnecting() {
      this.attempt++;
      const ms = Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** Math.min(this.attempt, 5));
      this.client.options.reconnectPeriod = Math.round(ms * (0.88 + Math.random() * 0.24));
      this.setState('reconnecting');
    }

    onError(err) {
      /* CONNACK 0x86 bad user name or password, 0x87 not authorized,
       * 0x85 client identifier not valid, 0x8A banned: trying again with the
       * same credentials cannot help. */
      if ([0x85, 0x86, 0x87, 0x8a].includes(err && err.code)) {
        this.state = 'refused';
        if (this.client) this.client.end(true);
        this.setState('refused', err.code === 0x86 || err.code === 0x87
          ? 'The broker refused this name or password.'
          : err.message);
      }
    }

    failPending(err) {
      for (const p of this.pending.values()) {
        clearTimeout(p.timer);
        p.reject(err);
      }
      this.pending.clear();
    }

    /* Sends one request; resolves with its response entries, in order. */
    request(commands) {
      return new Promise((resolve, reject) => {
        if (!this.connected) {
          reject(new Error('not connected'));
          return;
        }
        const corr = this.gen + '-' + ++this.reqSeq;
        const timer = setTimeout(() => {
          this.pending.delete(corr);
          reject(new Error('no response'));
        }, REQUEST_MS);
        this.pending.set(corr, { resolve: resolve, reject: reject, timer: timer });
        this.client.publish(P.CONTROL, P.request(commands), {
          qos: 0,
          properties: { responseTopic: P.RESPONSE, correlationData: corr },
        }, (err) => {
          if (err && this.pending.delete(corr)) {
            clearTimeout(timer);
            reject(err);
          }
        });
      });
    }

    /* One command; resolves with its entry, rejects with the plugin's error. */
    async command(cmd) {
      const entries = await this.request([cmd]);
      const e = entries && entries[0];
      if (!e) throw new Error('empty response');
      if (e.error) throw new Error(e.error);
      return e;
    }

    onMessage(topic, payload, packet) {
      const props = packet && packet.properties;
      if (topic === P.RESPONSE || (props && props.correlationData)) {
        let msg;
        try {
          msg = JSON.parse(P.decode(payload));
        } catch (e) {
          return;
        }
        const entries = Array.isArray(msg && msg.responses) ? msg.responses : [];
        const corr = props && props.correlationData ? P.decode(props.correlationData) : null;
        const p = corr && this.pending.get(corr);
        if (p) {
          this.pending.delete(corr);
          clearTimeout(p.timer);
          p.resolve(entries);
          return;
        }
        if (corr) return; /* the answer to a request given up on */
        for (const e of entries) this.onEntry(e);
        return;
      }
      const name = P.topicGroup(topic);
      const g = name && this.groups.get(name);
      const m = g && P.envelope(payload);
      if (m) this.onLive(g, m);
    }

    /* An entry nobody asked for: a replay page or an error. */
    onEntry(e) {
      if (!e || typeof e.command !== 'string') return;
      const g = typeof e.group === 'string' ? this.groups.get(e.group) : null;
      switch (e.command) {
        case 'replay':
          if (g && !e.error) {
            this.takePage(g, e);
            if (this.reading(g)) this.ackNow(g);
          }
          break;
        case 'publish':
          if (e.duplicate && !e.error) this.storedBefore(e);
          else this.refused(e.cid, e.error);
          break;
        case 'subscribe':
        case 'ack':
          if (e.error) this.emit('error', { group: e.group, message: e.error });
          break;
        case 'reads':
          if (g && e.reads && typeof e.reads === 'object') this.takeReads(g, e.reads);
          break;
        case 'presence':
          if (g && !e.error) this.takePresence(g, e.online, e.offline);
          break;
        default:
          break;
      }
    }
  }

  /* Shared by messages.js (a gap is fetched) and outbox.js (a stored
   * message that did not come back is fetched). */
  Chat.GAP_MS = GAP_MS;

  /* Adds the methods (and getters) of part, an object literal, to Chat:
   * how groups.js, messages.js, receipts.js and outbox.js add their jobs.
   * Non-enumerable, as a class's own methods are. */
  Chat.extend = function (part) {
    for (const [name, d] of Object.entries(Object.getOwnPropertyDescriptors(part))) {
      d.enumerable = false;
      Object.defineProperty(Chat.prototype, name, d);
    }
  };

  MqChat.Chat = Chat;
  MqChat.randomId = randomId;
})(typeof window !== 'undefined' ? window : globalThis);
