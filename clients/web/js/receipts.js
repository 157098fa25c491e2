/* receipts.js: read receipts and presence (protocol v1.1) in the Chat
 * (chat.js): the pushed `reads` and `presence` entries folded into a group's
 * reads and online, and the `receipts` and `presence` commands asked once
 * the open group is subscribed. Pushes do not carry the member count: someone
 * the page did not know makes it ask again. */
(function (root) {
  'use strict';
  const MqChat = root.MqChat;
  const Chat = MqChat.Chat;

  Chat.extend({
    takeReads(g, reads) {
      for (const [member, id] of Object.entries(reads)) {
        if (!Number.isSafeInteger(id)) continue;
        if (g.receiptsKnown && !g.reads.has(member)) this.recount(g);
        if (id > (g.reads.get(member) || 0)) g.reads.set(member, id);
      }
      g.mine = g.readBy(this.user);
      this.emit('receipts', { group: g.name });
      this.changed();
    },

    takePresence(g, online, offline) {
      for (const m of Array.isArray(online) ? online : []) {
        if (typeof m !== 'string') continue;
        if (g.receiptsKnown && !g.reads.has(m)) this.recount(g);
        g.online.add(m);
      }
      for (const m of Array.isArray(offline) ? offline : []) if (typeof m === 'string') g.online.delete(m);
      this.emit('presence', { group: g.name });
    },

    /* Someone the page did not know as a member: the member count changed
     * (pushes do not carry it). Ask again, once a second at most. */
    recount(g) {
      if (g.recountTimer) return;
      g.recountTimer = setTimeout(() => {
        g.recountTimer = null;
        if (this.connected && g.subscribed) this.fetchReceipts(g).catch(() => {});
      }, 1000);
    },

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
    },
  });
})(typeof window !== 'undefined' ? window : globalThis);
