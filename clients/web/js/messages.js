/* messages.js: the open group's messages in the Chat (chat.js): its
 * catch-up (a history page before the cursor for context, fetch pages from
 * the cursor, then the subscribe), the forward pages (fetch, replay) and live
 * messages put in order by the group's GroupLog (seq.js), a gap left open
 * GAP_MS fetched, the history pages of a scroll-up, and recall and edit
 * (v1.2): the commands, and each change applied to the message it names. */
(function (root) {
  'use strict';
  const MqChat = root.MqChat;
  const P = MqChat.proto;
  const Chat = MqChat.Chat;

  const GAP_MS = Chat.GAP_MS;
  const PAGE = 100; /* fetch limit (the plugin cuts it to its page_size) */
  const CONTEXT = 20; /* messages before the cursor shown on opening */
  const HISTORY_PAGE = 40; /* messages per scroll-up */
  const PARALLEL = 8; /* fetch requests in flight during a catch-up */
  const FETCH_BYTES = 3500; /* aimed-at size of one fetch response */
  const FETCH_MIN = 5;
  const MAX_FETCH_ROUNDS = 100000; /* bound on one catch-up */

  Chat.extend({
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
    },

    /* Sizes the next fetches so that each response stays under FETCH_BYTES. */
    learnSize(e) {
      const list = Array.isArray(e.messages) ? e.messages : [];
      if (list.length === 0) return;
      const avg = P.byteLength(JSON.stringify(list)) / list.length;
      this.fetchLimit = Math.max(FETCH_MIN, Math.min(PAGE, Math.floor(FETCH_BYTES / avg)));
    },

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
      for (const m of msgs) {
        this.applyChange(g, m);
        shown = shown.concat(g.log.add(m));
      }
      this.shown(g, shown);
      return msgs.length;
    },

    onLive(g, m) {
      if (m.id > g.head) g.head = m.id;
      this.noteLast(g, m);
      if (!g.log) {
        this.changed();
        return;
      }
      this.applyChange(g, m);
      this.shown(g, g.log.add(m));
    },

    /* v1.2: m, just arrived, recalls or edits a message the page holds:
     * that message becomes its new version now, in place, whether it is
     * shown (its bubble changes: 'changed') or still held behind a gap. */
    applyChange(g, m) {
      const ch = P.changeOf(m);
      if (!ch) return;
      if (g.log.update(ch.id, (n) => P.applyChange(n, m)) === 'shown') {
        this.emit('changed', { group: g.name, id: ch.id });
      }
      if (g.last && g.last.id === ch.id) g.last = g.log.find(ch.id) || g.last;
    },

    /* Recall (v1.2) of one's own message id in group; the message that
     * carries it comes back like any message and changes the bubble.
     * Rejects with the plugin's reason (too late, not the sender ...). */
    recall(group, id) {
      return this.command({ command: 'recall', group: group, id: id });
    },

    /* Edit (v1.2) of one's own message id: its new text. */
    edit(group, id, body) {
      return this.command({ command: 'edit', group: group, id: id, body: body });
    },

    shown(g, list) {
      for (const m of list) {
        if (m.from === this.user && typeof m.cid === 'string') this.delivered(m.cid);
      }
      if (list.length) this.emit('append', { group: g.name, messages: list });
      this.markRead(g);
      this.watchGap(g);
      this.changed();
    },

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
    },

    /* Scroll-up: the next page of history. Resolves false when nothing
     * older is left. */
    async loadOlder(name) {
      const g = this.groups.get(name);
      if (!g || !g.log || g.olderDone) return false;
      if (g.olderLoading || !g.contextDone || !this.connected) return true;
      await this.older(g, HISTORY_PAGE);
      return !g.olderDone;
    },

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
    },

    /* A history page (newest first): put before what is shown. */
    takeOlder(g, e) {
      const msgs = Array.isArray(e.messages) ? e.messages.map(P.envelope).filter(Boolean) : [];
      const added = g.log.addOlder(msgs);
      if (!e.more || g.log.lo <= 1) g.olderDone = true;
      if (e.truncated) g.truncated = true;
      if (added.length) this.noteLast(g, added[added.length - 1]);
      this.emit('prepend', { group: g.name, messages: added });
    },
  });
})(typeof window !== 'undefined' ? window : globalThis);
