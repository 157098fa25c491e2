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
 *      marker too, so reading on another device clears it here. */
(function (root) {
  'use strict';
  const MqChat = (root.MqChat = root.MqChat || {});
  const P = MqChat.proto;

  const ACK_MS = 300; /* acks of live messages: at most one per group per this */
  const GAP_MS = 1500; /* a gap no replay filled in this long is fetched */
  const SYNC_MS = 30000; /* unread counts of unsubscribed groups */
  const REQUEST_MS = 10000; /* a request without a response fails after this */
  const PAGE = 100; /* fetch limit (the plugin cuts it to its page_size) */
  const CONTEXT = 20; /* messages before the cursor shown on opening */
  const HISTORY_PAGE = 40; /* messages per scroll-up */
  const PARALLEL = 8; /* fetch requests in flight during a catch-up */
  const FETCH_BYTES = 3500; /* aimed-at size of one fetch response */
  const FETCH_MIN = 5;
  const MAX_FETCH_ROUNDS = 100000; /* bound on one catch-up */
  const RECONNECT_MIN_MS = 1000;
  const RECONNECT_MAX_MS = 16000;
  const OUTBOX_KEY = 'mqchat.outbox.';

  function randomId(n) {
    const a = new Uint8Array(n);
    crypto.getRandomValues(a);
    return Array.from(a, (b) => (b % 36).toString(36)).join('');
  }

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
        reconnectPeriod: RECONNECT_MIN_MS,
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
      this.client.options.reconnectPeriod = RECONNECT_MIN_MS;
      for (const g of this.groups.values()) {
        g.subscribed = g.subscribing = g.receiptsKnown = false;
        g.online.clear(); /* pushes come again to subscribed groups only */
      }
      this.setState('online');
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
      for (const g of this.groups.values()) g.subscribed = g.subscribing = false;
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
          this.refused(e.cid, e.error);
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

    /* ------------------------------------------------------------------
     * Read receipts and presence (v1.1)
     * ------------------------------------------------------------------ */

    takeReads(g, reads) {
      for (const [member, id] of Object.entries(reads)) {
        if (!Number.isSafeInteger(id)) continue;
        if (g.receiptsKnown && !g.reads.has(member)) this.recount(g);
        if (id > (g.reads.get(member) || 0)) g.reads.set(member, id);
      }
      g.mine = g.readBy(this.user);
      this.emit('receipts', { group: g.name });
      this.changed();
    }

    takePresence(g, online, offline) {
      for (const m of Array.isArray(online) ? online : []) {
        if (typeof m !== 'string') continue;
        if (g.receiptsKnown && !g.reads.has(m)) this.recount(g);
        g.online.add(m);
      }
      for (const m of Array.isArray(offline) ? offline : []) if (typeof m === 'string') g.online.delete(m);
      this.emit('presence', { group: g.name });
    }

    /* Someone the page did not know as a member: the member count changed
     * (pushes do not carry it). Ask again, once a second at most. */
    recount(g) {
      if (g.recountTimer) return;
      g.recountTimer = setTimeout(() => {
        g.recountTimer = null;
        if (this.connected && g.subscribed) this.fetchReceipts(g).catch(() => {});
      }, 1000);
    }

    /* The open group's read markers and who is online, page by page
     * (members in name order, `after` the last one). */
    async fetchReceipts(g) {
      const gen = this.gen;
      const reads = new Map();
      let after = null;
      for (let page = 0; page < 100; page++) {
        const e = await this.command(Object.assign({ command: 'receipts', group: g.name },
          after === null ? {} : { after: after }));
        if (gen !== this.gen) return;
        if (Number.isSafeInteger(e.members)) g.members = e.members;
        for (const [member, id] of Object.entries(e.reads || {})) {
          /* a push that came meanwhile may be newer */
          if (Number.isSafeInteger(id)) reads.set(member, Math.max(id, g.reads.get(member) || 0));
        }
        if (!e.more || typeof e.after !== 'string') break;
        after = e.after;
      }
      g.reads = reads; /* members who left are gone from it */
      g.mine = g.readBy(this.user);
      after = null;
      const online = new Set();
      for (let page = 0; page < 100; page++) {
        const e = await this.command(Object.assign({ command: 'presence', group: g.name },
          after === null ? {} : { after: after }));
        if (gen !== this.gen) return;
        for (const m of Array.isArray(e.online) ? e.online : []) online.add(m);
        if (Number.isSafeInteger(e.members)) g.members = e.members;
        if (!e.more || typeof e.after !== 'string') break;
        after = e.after;
      }
      g.online = online;
      g.receiptsKnown = true;
      this.emit('receipts', { group: g.name });
      this.emit('presence', { group: g.name });
    }

    /* ------------------------------------------------------------------
     * Groups
     * ------------------------------------------------------------------ */

    group(name) {
      let g = this.groups.get(name);
      if (!g) {
        g = new Group(name);
        this.groups.set(name, g);
      }
      return g;
    }

    list() {
      return [...this.groups.values()].filter((g) => g.member);
    }

    changed() {
      this.emit('groups', {});
    }

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
    }

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
      }
      for (const g of this.groups.values()) if (!listed.has(g.name)) g.member = false;
      this.synced = true;
    }

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
    }

    noteLast(g, m) {
      if (!g.last || m.id > g.last.id) g.last = m;
    }

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
    }

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
    }

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
    }

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
    }

    close() {
      const g = this.openName && this.groups.get(this.openName);
      if (g) this.ackNow(g);
      this.openName = null;
      this.changed();
    }

    reading(g) {
      return g.name === this.openName && this.visible;
    }

    setVisible(v) {
      this.visible = v;
      const g = this.openName && this.groups.get(this.openName);
      if (g && v) {
        this.markRead(g);
        this.changed();
      }
      if (v && this.connected && this.synced) this.sync(false).catch(() => {});
    }

    /* Everything shown of the open group counts as read while visible. */
    markRead(g) {
      if (!this.reading(g) || !g.log) return;
      if (g.log.hi > g.seen) g.seen = g.log.hi;
      this.scheduleAck(g);
    }

    /* Catch-up of an opened group: context, fetch pages, then subscribe.
     *
     * Debian's Mosquitto 2.0.11 sends a WebSocket client one 4 KiB piece of
     * a packet per pass of its main loop, which waits up to 100 ms: a 40 KB
     * page takes a second, while packets under 4 KiB go out at once, many
     * per pass (docs/web.md). So the pages asked for are small (FETCH_BYTES,
     * by the size of the messages seen so far), several at a time in
     * separate requests; ids are dense, so each one's `after` is known. */
    async catchUp(g) {
      if (g.catching) {
        g.catchAgain = true;
        return;
      }
      g.catching = true;
      this.changed();
      const gen = this.gen;
      try {
        do {
          g.catchAgain = false;
          /* The context before the cursor comes meanwhile. */
          const context = !g.contextDone && g.log.lo > 1
            ? this.older(g, CONTEXT).then(() => null, (err) => err) : null;
          for (let round = 0; round < MAX_FETCH_ROUNDS && gen === this.gen; round++) {
            const from = g.log.hi;
            const limit = this.fetchLimit;
            const n = round === 0 ? 1
              : Math.max(1, Math.min(PARALLEL, Math.ceil((g.head - from) / limit)));
            let more = false;
            await Promise.all(Array.from({ length: n }, (_, i) => this.command({
              command: 'fetch', group: g.name, after: from + i * limit, limit: limit,
            }).then((e) => {
              if (gen !== this.gen) return;
              this.learnSize(e);
              this.takePage(g, e);
              more = more || !!e.more;
            })));
            if (gen !== this.gen) return;
            this.ackNow(g);
            if (g.log.hi <= from || (!more && g.log.heldCount === 0)) break;
          }
          const failed = context && (await context);
          if (failed) throw failed;
          g.contextDone = true;
        } while (g.catchAgain && gen === this.gen);
        if (gen === this.gen && g.name === this.openName) await this.subscribe(g);
        /* Subscribed, pushes keep them current: ask for where they stand. */
        if (gen === this.gen && g.subscribed && !g.receiptsKnown) await this.fetchReceipts(g);
      } catch (err) {
        if (gen === this.gen) this.emit('error', { group: g.name, message: err.message });
      } finally {
        g.catching = false;
        this.emit('caught', { group: g.name });
        this.changed();
      }
    }

    /* Sizes the next fetches so that each response stays under FETCH_BYTES. */
    learnSize(e) {
      const list = Array.isArray(e.messages) ? e.messages : [];
      if (list.length === 0) return;
      const avg = P.byteLength(JSON.stringify(list)) / list.length;
      this.fetchLimit = Math.max(FETCH_MIN, Math.min(PAGE, Math.floor(FETCH_BYTES / avg)));
    }

    /* A forward page (replay or fetch). Returns how many messages it had. */
    takePage(g, e) {
      if (Number.isSafeInteger(e.head) && e.head > g.head) g.head = e.head;
      const msgs = Array.isArray(e.messages) ? e.messages.map(P.envelope).filter(Boolean) : [];
      if (msgs.length) this.noteLast(g, msgs[msgs.length - 1]);
      if (!g.log) {
        this.changed();
        return msgs.length;
      }
      let shown = [];
      if (e.truncated && Number.isSafeInteger(e.first) && e.first > g.log.hi + 1) {
        shown = shown.concat(g.log.skipTo(e.first));
        this.emit('notice', { group: g.name, text: 'Older messages were removed by retention.' });
      }
      for (const m of msgs) shown = shown.concat(g.log.add(m));
      this.shown(g, shown);
      return msgs.length;
    }

    onLive(g, m) {
      if (m.id > g.head) g.head = m.id;
      this.noteLast(g, m);
      if (!g.log) {
        this.changed();
        return;
      }
      this.shown(g, g.log.add(m));
    }

    shown(g, list) {
      for (const m of list) {
        if (m.from === this.user && typeof m.cid === 'string') this.delivered(m.cid);
      }
      if (list.length) this.emit('append', { group: g.name, messages: list });
      this.markRead(g);
      this.watchGap(g);
      this.changed();
    }

    /* A gap that stays open is fetched (a lost QoS 0 page, or a message the
     * broker stored but did not deliver live). */
    watchGap(g) {
      if (!g.log || g.log.heldCount === 0) {
        clearTimeout(g.gapTimer);
        g.gapTimer = null;
        return;
      }
      if (g.gapTimer) return;
      const hi = g.log.hi;
      g.gapTimer = setTimeout(() => {
        g.gapTimer = null;
        if (this.connected && g.log.heldCount > 0 && g.log.hi === hi) this.catchUp(g);
        else this.watchGap(g);
      }, GAP_MS);
    }

    /* Scroll-up: the next page of history. Resolves false when nothing
     * older is left. */
    async loadOlder(name) {
      const g = this.groups.get(name);
      if (!g || !g.log || g.olderDone) return false;
      if (g.olderLoading || !g.contextDone || !this.connected) return true;
      await this.older(g, HISTORY_PAGE);
      return !g.olderDone;
    }

    async older(g, limit) {
      if (g.log.lo <= 1) {
        g.olderDone = true;
        return;
      }
      g.olderLoading = true;
      try {
        this.takeOlder(g, await this.command({
          command: 'history', group: g.name, before: g.log.lo, limit: limit,
        }));
      } finally {
        g.olderLoading = false;
      }
    }

    /* A history page (newest first): put before what is shown. */
    takeOlder(g, e) {
      const msgs = Array.isArray(e.messages) ? e.messages.map(P.envelope).filter(Boolean) : [];
      const added = g.log.addOlder(msgs);
      if (!e.more || g.log.lo <= 1) g.olderDone = true;
      if (e.truncated) g.truncated = true;
      if (added.length) this.noteLast(g, added[added.length - 1]);
      this.emit('prepend', { group: g.name, messages: added });
    }

    /* ------------------------------------------------------------------
     * Acks
     * ------------------------------------------------------------------ */

    scheduleAck(g) {
      if (g.seen <= g.ackSent || g.ackTimer) return;
      g.ackTimer = setTimeout(() => {
        g.ackTimer = null;
        this.ackNow(g);
      }, ACK_MS);
    }

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
    }

    /* ------------------------------------------------------------------
     * Sending: each message keeps its cid until the broker stored it, so
     * every retry (MQTT.js's after a reconnect, ours after a reload) is
     * stored once.
     * ------------------------------------------------------------------ */

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
    }

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
    }

    flushOutbox() {
      for (const e of this.outbox) if (e.state === 'pending') this.publishEntry(e);
    }

    retry(cid) {
      const e = this.outbox.find((x) => x.cid === cid);
      if (!e) return;
      e.state = 'pending';
      this.emit('outbox', { group: e.group });
      this.publishEntry(e);
    }

    discard(cid) {
      const e = this.outbox.find((x) => x.cid === cid);
      if (!e) return;
      this.outbox.splice(this.outbox.indexOf(e), 1);
      this.saveOutbox();
      this.emit('outbox', { group: e.group });
    }

    delivered(cid) {
      const i = this.outbox.findIndex((x) => x.cid === cid);
      if (i < 0) return;
      const e = this.outbox[i];
      this.outbox.splice(i, 1);
      this.saveOutbox();
      this.emit('outbox', { group: e.group });
    }

    refused(cid, reason) {
      const e = typeof cid === 'string' && this.outbox.find((x) => x.cid === cid);
      if (!e) {
        if (reason) this.emit('error', { message: reason });
        return;
      }
      e.state = 'failed';
      e.reason = reason || 'refused by the broker';
      this.emit('outbox', { group: e.group });
    }

    pendingFor(group) {
      return this.outbox.filter((e) => e.group === group);
    }

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
    }

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
    }
  }

  MqChat.Chat = Chat;
  MqChat.randomId = randomId;
})(typeof window !== 'undefined' ? window : globalThis);
