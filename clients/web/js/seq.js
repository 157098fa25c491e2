/* seq.js: the messages of one group as the page holds them. Each id is shown
 * once and in id order, whether it came live, in a replay page, by fetch or
 * by history; a message ahead of a gap waits until the gap is filled.
 *
 * Invariants of a GroupLog:
 *   1. msgs holds exactly the ids lo..hi, ascending, each once (less the ids
 *      retention removed, which skipTo and a truncated history step over).
 *   2. held holds only ids above hi + 1; an id is never both shown and held.
 *   3. lo and hi only move outwards: lo down (history), hi up (forward).
 * A recall or an edit (protocol v1.2) replaces a message in place (update):
 * its id and place stay.
 * No DOM, no network: tests/web/seq_test.mjs runs it under Node. */
(function (root) {
  'use strict';
  const MqChat = (root.MqChat = root.MqChat || {});

  class GroupLog {
    /* baseline: the last id the device holds without showing it (its
     * cursor); forward messages start after it, history before it. */
    constructor(baseline, maxHeld) {
      this.lo = baseline + 1; /* lowest id shown, or baseline + 1 when none */
      this.hi = baseline; /* highest id shown with no gap below it */
      this.msgs = []; /* shown, ascending */
      this.held = new Map(); /* id -> message, ids > hi + 1 */
      this.maxHeld = maxHeld || 10000;
    }

    /* Takes one message that came forward (live, replay, fetch). Returns the
     * messages that can now be shown, in order (often none or one). */
    add(m) {
      const id = m.id;
      if (id <= this.hi) return [];
      if (id > this.hi + 1) {
        /* Beyond the bound the highest go: they come again with the gap. */
        if (!this.held.has(id) && this.held.size < this.maxHeld) this.held.set(id, m);
        return [];
      }
      if (this.msgs.length === 0) this.lo = id;
      const out = [m];
      this.hi = id;
      for (let next = this.held.get(this.hi + 1); next; next = this.held.get(this.hi + 1)) {
        this.held.delete(this.hi + 1);
        out.push(next);
        this.hi++;
      }
      for (const x of out) this.msgs.push(x);
      return out;
    }

    /* Retention removed the ids below first that the device never held:
     * moves past them, then shows what was held from there on. */
    skipTo(first) {
      if (first - 1 <= this.hi) return [];
      if (this.msgs.length === 0) this.lo = first;
      this.hi = first - 1;
      for (const id of [...this.held.keys()]) if (id <= this.hi) this.held.delete(id);
      const next = this.held.get(first);
      if (!next) return [];
      this.held.delete(first);
      return this.add(next);
    }

    /* Takes a history page (newest first, all below lo). Returns the
     * messages put before the shown ones, ascending. */
    addOlder(list) {
      const older = [];
      let lo = this.lo;
      for (const m of list) {
        if (m.id < lo) {
          older.push(m);
          lo = m.id;
        }
      }
      if (older.length === 0) return [];
      older.reverse();
      if (this.msgs.length === 0) this.hi = Math.max(this.hi, older[older.length - 1].id);
      this.lo = lo;
      this.msgs = older.concat(this.msgs);
      return older;
    }

    /* The message of id, shown or held, or undefined. */
    find(id) {
      if (this.held.has(id)) return this.held.get(id);
      let lo = 0;
      let hi = this.msgs.length - 1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        const x = this.msgs[mid].id;
        if (x === id) return this.msgs[mid];
        if (x < id) lo = mid + 1;
        else hi = mid - 1;
      }
      return undefined;
    }

    /* Replaces the message of id (shown or held) by f(it) unless f returns
     * null: a recall or an edit (v1.2). Returns 'shown' or 'held' when it
     * replaced one, else null. Ids and order stay as they are. */
    update(id, f) {
      const old = this.find(id);
      const m = old && f(old);
      if (!m) return null;
      if (this.held.has(id)) {
        this.held.set(id, m);
        return 'held';
      }
      this.msgs[this.msgs.indexOf(old)] = m;
      return 'shown';
    }

    get heldCount() {
      return this.held.size;
    }
  }

  MqChat.GroupLog = GroupLog;
})(typeof window !== 'undefined' ? window : globalThis);
