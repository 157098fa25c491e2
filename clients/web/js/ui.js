/* ui.js: renders a Chat (chat.js) into index.html's elements: the group list
 * with unread counts, the open group's messages with "read by k of n" under
 * one's own, who is online, the outbox, the connection state; and turns the
 * composer and the join form into calls on the Chat. Recalls and edits
 * (v1.2) change a bubble in place ("Message recalled", "edited"), and one's
 * own bubbles have a menu to recall or edit them.
 * Message text only ever reaches the page through textContent. */
(function (root) {
  'use strict';
  const MqChat = (root.MqChat = root.MqChat || {});
  const P = MqChat.proto;

  const RUN_MS = 5 * 60 * 1000; /* one sender's messages within this share a header */
  const NEAR_BOTTOM_PX = 96;
  const OLDER_TRIGGER_PX = 400;

  const clock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });
  const dateFmt = new Intl.DateTimeFormat(undefined, { weekday: 'long', month: 'long', day: 'numeric' });
  const shortDate = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' });

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function hue(name) {
    let h = 7;
    for (const ch of name) h = (h * 31 + ch.codePointAt(0)) >>> 0;
    return h % 360;
  }

  function initials(name) {
    const words = name.replace(/[-_.]+/g, ' ').trim().split(/\s+/).filter(Boolean);
    const s = words.length > 1 ? words[0][0] + words[1][0] : [...(words[0] || '?')].slice(0, 1).join('');
    return s.toUpperCase();
  }

  function avatar(cls, name) {
    const a = el('span', cls, initials(name));
    a.style.setProperty('--hue', hue(name));
    a.setAttribute('aria-hidden', 'true');
    return a;
  }

  function dayKey(ts) {
    const d = new Date(ts);
    return d.getFullYear() * 10000 + d.getMonth() * 100 + d.getDate();
  }

  function dayLabel(ts) {
    const today = new Date();
    const k = dayKey(ts);
    if (k === dayKey(today.getTime())) return 'Today';
    if (k === dayKey(today.getTime() - 864e5)) return 'Yesterday';
    return dateFmt.format(new Date(ts));
  }

  function listTime(ts) {
    if (!ts) return '';
    return dayKey(ts) === dayKey(Date.now()) ? clock.format(new Date(ts)) : shortDate.format(new Date(ts));
  }

  /* Text with http(s) links made clickable; everything else stays text. */
  function fillText(node, text) {
    const re = /\bhttps?:\/\/[^\s<>"']+[^\s<>"'.,;:!?)\]]/g;
    let at = 0;
    for (let m = re.exec(text); m; m = re.exec(text)) {
      if (m.index > at) node.append(text.slice(at, m.index));
      const a = el('a', '', m[0]);
      a.href = m[0];
      a.target = '_blank';
      a.rel = 'noopener noreferrer';
      node.append(a);
      at = m.index + m[0].length;
    }
    if (at < text.length) node.append(text.slice(at));
  }

  class UI {
    constructor(chat, user) {
      this.chat = chat;
      this.user = user;
      this.$ = (id) => document.getElementById(id);
      this.app = this.$('app');
      this.log = this.$('log');
      this.scroller = this.$('scroller');
      this.input = this.$('composer-input');
      this.last = null; /* last message rendered in the log */
      this.below = 0; /* messages appended while scrolled up */
      this.anchorNew = false; /* the first unread message is still to be shown */
      this.editing = null; /* {group, id}: the composer edits that message (v1.2) */
      this.listeners = [];
      this.bind();
      const me = this.$('me-avatar');
      me.textContent = initials(user);
      me.style.setProperty('--hue', hue(user));
      this.$('me-name').textContent = user;
      this.renderGroups();
      this.renderOpen();
    }

    on(target, type, fn) {
      target.addEventListener(type, fn);
      this.listeners.push([target, type, fn]);
    }

    destroy() {
      clearTimeout(this.bannerTimer);
      for (const [t, type, fn] of this.listeners) t.removeEventListener(type, fn);
      this.listeners = [];
      this.log.replaceChildren();
      this.$('pending').replaceChildren();
      this.$('group-list').replaceChildren();
    }

    bind() {
      const c = this.chat;
      this.on(c, 'status', (e) => {
        this.renderStatus(e.detail);
        this.renderPresence();
      });
      this.on(c, 'groups', () => this.renderGroups());
      this.on(c, 'reset', (e) => e.detail.group === c.openName && this.renderOpen());
      this.on(c, 'append', (e) => e.detail.group === c.openName && this.append(e.detail.messages));
      this.on(c, 'prepend', (e) => e.detail.group === c.openName && this.prepend());
      this.on(c, 'caught', (e) => {
        if (e.detail.group !== c.openName) return;
        this.anchorNew = false;
        this.renderTop();
        this.fillUp();
      });
      this.on(c, 'outbox', (e) => e.detail.group === c.openName && this.renderPending(true));
      this.on(c, 'notice', (e) => e.detail.group === c.openName && this.notice(e.detail.text, false));
      this.on(c, 'error', (e) => {
        if (!e.detail.group || e.detail.group === c.openName) this.notice(e.detail.message, true);
      });
      this.on(c, 'acked', (e) => {
        const a = this.groupLink(e.detail.group);
        if (a) a.dataset.acked = String(e.detail.id);
      });
      this.on(c, 'receipts', (e) => e.detail.group === c.openName && this.renderReceipts());
      this.on(c, 'changed', (e) => e.detail.group === c.openName && this.renderChanged(e.detail.id));
      this.on(c, 'presence', (e) => e.detail.group === c.openName && this.renderPresence());

      this.on(this.$('composer'), 'submit', (e) => {
        e.preventDefault();
        this.sendDraft();
      });
      this.on(this.input, 'keydown', (e) => {
        if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
          e.preventDefault();
          this.sendDraft();
        } else if (e.key === 'Escape' && this.editing) {
          e.preventDefault();
          this.stopEditing();
        }
      });
      /* The menu on one's own messages (v1.2): recall, edit. */
      this.on(this.log, 'click', (e) => this.onLogClick(e));
      this.on(this.input, 'input', () => this.fitInput());
      this.on(this.scroller, 'scroll', () => this.onScroll());
      this.on(this.$('jump'), 'click', () => {
        this.toBottom();
        this.input.focus();
      });
      this.on(this.$('pending'), 'click', (e) => {
        const b = e.target.closest('button[data-cid]');
        if (!b) return;
        if (b.dataset.action === 'retry') c.retry(b.dataset.cid);
        else c.discard(b.dataset.cid);
      });
      /* A group chosen from the list (click, or Enter on it): on a wide
       * screen the composer takes the focus, as after joining. */
      this.on(this.$('group-list'), 'click', (e) => {
        if (e.target.closest('a.group')) this.focusComposer = true;
      });
      this.on(this.$('join-form'), 'submit', (e) => {
        e.preventDefault();
        this.joinFromForm();
      });
      /* Alt+Up / Alt+Down: the previous or next group. */
      this.on(document, 'keydown', (e) => {
        if (!e.altKey || (e.key !== 'ArrowUp' && e.key !== 'ArrowDown')) return;
        const names = this.sorted().map((g) => g.name);
        if (names.length === 0) return;
        e.preventDefault();
        let i = names.indexOf(c.openName);
        i = e.key === 'ArrowUp' ? (i <= 0 ? names.length - 1 : i - 1) : (i + 1) % names.length;
        location.hash = encodeURIComponent(names[i]);
      });
    }

    groupLink(name) {
      for (const a of this.$('group-list').querySelectorAll('a.group')) {
        if (a.dataset.group === name) return a;
      }
      return null;
    }

    /* ------------------------------------------------------------ status */

    renderStatus(s) {
      document.body.dataset.conn = s.state;
      const text = {
        connecting: 'Connecting…',
        online: 'Connected',
        reconnecting: 'Reconnecting…',
        refused: 'Refused',
      }[s.state] || s.state;
      this.$('conn-text').textContent = text;
      const banner = this.$('banner');
      clearTimeout(this.bannerTimer);
      if (s.state === 'online' || s.state === 'refused') {
        banner.hidden = true;
      } else if (s.state === 'connecting') {
        /* Said only if the first connect takes a while. */
        banner.textContent = 'Connecting to the broker…';
        this.bannerTimer = setTimeout(() => (banner.hidden = false), 1000);
      } else {
        banner.textContent = 'Connection lost. Reconnecting… Messages you write now go out when it is back.';
        banner.hidden = false;
      }
    }

    /* ------------------------------------------------------------ groups */

    sorted() {
      return this.chat.list().sort((a, b) => {
        const ta = a.last ? a.last.ts : 0;
        const tb = b.last ? b.last.ts : 0;
        return tb - ta || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
      });
    }

    renderGroups() {
      const c = this.chat;
      const list = this.$('group-list');
      const groups = this.sorted();
      const focused = document.activeElement && document.activeElement.closest
        ? document.activeElement.closest('a.group') : null;
      const focusName = focused ? focused.dataset.group : null;
      const items = [];
      let total = 0;
      for (const g of groups) {
        const unread = g.name === c.openName && c.visible ? 0 : g.unread;
        total += unread;
        const li = el('li');
        const a = el('a', 'group' + (unread ? ' unread' : ''));
        a.href = '#' + encodeURIComponent(g.name);
        a.dataset.group = g.name;
        a.dataset.unread = String(unread);
        a.dataset.acked = String(g.acked);
        if (g.name === c.openName) a.setAttribute('aria-current', 'page');
        a.append(avatar('gavatar', g.name));
        a.append(el('span', 'g-name', g.name));
        a.append(el('span', 'g-time', g.last ? listTime(g.last.ts) : ''));
        const prev = el('span', 'g-preview');
        if (g.last) {
          const who = g.last.from === this.user ? 'You' : g.last.from;
          prev.textContent = who + ': ' + P.bodyText(g.last).replace(/\s+/g, ' ');
        } else {
          prev.textContent = 'No messages yet';
        }
        a.append(prev);
        if (unread) {
          const b = el('span', 'badge', unread > 999 ? '999+' : String(unread));
          b.setAttribute('aria-hidden', 'true');
          a.append(b, el('span', 'sr-only', ', ' + unread + ' unread'));
        }
        li.append(a);
        items.push(li);
      }
      list.replaceChildren(...items);
      this.$('groups-empty').hidden = groups.length > 0 || !c.synced;
      if (focusName) {
        const a = this.groupLink(focusName);
        if (a) a.focus();
      }
      document.title = (total ? '(' + total + ') ' : '') +
        (c.openName ? c.openName + ' · ' : '') + 'mosquitto-chat';
      this.renderHeader();
    }

    async joinFromForm() {
      const input = this.$('join-input');
      const err = this.$('join-error');
      const name = input.value.trim();
      err.textContent = '';
      if (!name) return;
      const why = P.groupError(name);
      if (why) {
        err.textContent = why;
        return;
      }
      try {
        await this.chat.join(name);
        input.value = '';
        location.hash = encodeURIComponent(name);
        this.input.focus();
      } catch (e) {
        err.textContent = 'Cannot join ' + name + ': ' + e.message;
      }
    }

    /* ------------------------------------------------------ conversation */

    renderHeader() {
      const c = this.chat;
      const name = c.openName;
      this.app.classList.toggle('has-open', !!name);
      if (!name) return;
      const g = c.groups.get(name);
      this.$('conv-name').textContent = name;
      const av = this.$('conv-avatar');
      av.textContent = initials(name);
      av.style.setProperty('--hue', hue(name));
      let sub = '';
      if (!g || !g.log) sub = c.connected ? 'Opening…' : 'Waiting for the connection…';
      else if (g.catching) sub = 'Loading messages…';
      else sub = g.head === 1 ? '1 message' : g.head + ' messages';
      this.$('conv-sub').textContent = sub;
      this.input.setAttribute('placeholder', 'Message ' + name);
      this.renderPresence();
    }

    /* Who is online in the open group, once known: "k of n online", the
     * names in the title (and for screen readers). */
    renderPresence() {
      const g = this.chat.openName && this.chat.groups.get(this.chat.openName);
      const box = this.$('conv-presence');
      if (!g || !g.receiptsKnown || !g.members || this.chat.state !== 'online') {
        box.hidden = true;
        return;
      }
      const names = [...g.online].sort();
      box.dataset.online = names.join(' ');
      box.title = names.length ? 'Online: ' + names.join(', ') : 'Nobody is online';
      box.replaceChildren(el('span', 'p-count', names.length + ' of ' + g.members + ' online'));
      const shown = names.filter((n) => n !== this.user).slice(0, 3);
      if (shown.length) {
        const more = names.length - (names.includes(this.user) ? 1 : 0) - shown.length;
        box.append(el('span', 'p-names', shown.join(', ') + (more > 0 ? ' +' + more : '')));
      }
      box.hidden = false;
    }

    /* "Read by k of n" under one's own messages. */
    receiptText(g, id) {
      if (!g || !g.receiptsKnown || g.members < 2) return '';
      const r = g.readCount(id, this.user);
      if (r.k === 0) return '';
      return r.k >= r.n ? 'Read by everyone' : 'Read by ' + r.k + ' of ' + r.n;
    }

    renderReceipts() {
      const g = this.chat.groups.get(this.chat.openName);
      const stick = this.nearBottom(); /* a line more must not push the newest out of view */
      for (const node of this.log.querySelectorAll('.msg.mine .receipts')) {
        node.textContent = this.receiptText(g, Number(node.dataset.id));
      }
      if (stick) this.scroller.scrollTop = this.scroller.scrollHeight;
    }

    renderOpen() {
      const c = this.chat;
      const name = c.openName;
      if (this.editing && this.editing.group !== name) this.stopEditing();
      this.renderHeader();
      this.below = 0;
      this.$('jump').hidden = true;
      if (!name) {
        this.log.replaceChildren();
        this.$('pending').replaceChildren();
        return;
      }
      this.log.setAttribute('aria-label', 'Messages in ' + name);
      this.log.setAttribute('aria-busy', 'true');
      this.rebuild();
      this.renderPending(false);
      const g = c.groups.get(name);
      this.anchorNew = !!(g && g.newFrom);
      if (this.anchorNew) this.anchor();
      else this.toBottom();
      this.log.setAttribute('aria-busy', 'false');
      if (g && g.log) this.fillUp();
      const wide = matchMedia('(min-width: 760px)').matches;
      if (wide && (this.focusComposer || document.activeElement === document.body)) {
        this.input.focus({ preventScroll: true });
      }
      this.focusComposer = false;
    }

    /* Renders every held message of the open group again. */
    rebuild() {
      const g = this.chat.groups.get(this.chat.openName);
      this.last = null;
      const frag = document.createDocumentFragment();
      if (g && g.log) for (const m of g.log.msgs) this.addNode(frag, m, g);
      this.log.replaceChildren(frag);
      this.renderTop();
    }

    renderTop() {
      const g = this.chat.groups.get(this.chat.openName);
      const top = this.$('log-top');
      if (!g || !g.log) top.textContent = '';
      else if (g.olderLoading) top.textContent = 'Loading older messages…';
      else if (g.catching && g.log.msgs.length === 0) top.textContent = 'Loading messages…';
      else if (!g.olderDone) top.textContent = '';
      else if (g.truncated) top.textContent = 'Older messages were removed by the retention policy.';
      else top.textContent = g.log.msgs.length ? 'This is the beginning of ' + g.name + '.' : 'No messages yet. Say hello!';
    }

    addNode(parent, m, g) {
      /* A message that carries a recall or an edit (v1.2) has no bubble of
       * its own: it changes the bubble of the message it names. */
      if (P.changeOf(m)) return;
      const prev = this.last;
      const sameDay = prev && dayKey(prev.ts) === dayKey(m.ts);
      if (!sameDay) {
        const d = el('div', 'day');
        d.setAttribute('role', 'separator');
        d.append(el('span', '', dayLabel(m.ts)));
        parent.append(d);
      }
      let divider = false;
      if (g && g.newFrom && m.id === g.newFrom && prev) {
        const n = el('div', 'divider-new', 'New messages');
        n.setAttribute('role', 'separator');
        parent.append(n);
        divider = true;
      }
      const cont = sameDay && !divider && prev.from === m.from && m.ts - prev.ts < RUN_MS;
      parent.append(this.messageNode(m, cont));
      this.last = m;
    }

    messageNode(m, cont) {
      const mine = m.from === this.user;
      const row = el('div', 'msg' + (mine ? ' mine' : '') + (cont ? ' cont' : ''));
      row.dataset.id = String(m.id);
      row.dataset.from = m.from;
      if (!mine) row.append(avatar('avatar', m.from || '?'));
      const b = el('div', 'bubble');
      b.style.setProperty('--hue', hue(m.from));
      if (!mine && !cont) b.append(el('div', 'from', m.from));
      else b.append(el('span', 'sr-only', (mine ? 'You' : m.from) + ': '));
      const recalled = m.recalled === true;
      const body = el('div', 'body' + (recalled ? ' recalled' : typeof m.body === 'string' ? '' : ' json'));
      fillText(body, P.bodyText(m));
      const t = el('time', 'time', m.ts ? clock.format(new Date(m.ts)) : '');
      if (m.ts) t.dateTime = new Date(m.ts).toISOString();
      b.append(body);
      if (!recalled && typeof m.edited === 'number') {
        const ed = el('span', 'edited', 'edited');
        ed.title = 'Edited ' + clock.format(new Date(m.edited));
        b.append(ed);
      }
      b.append(t);
      if (mine && !recalled) b.append(this.menuButton(m));
      if (mine) {
        const g = this.chat.groups.get(this.chat.openName);
        const r = el('div', 'receipts', this.receiptText(g, m.id));
        r.dataset.id = String(m.id);
        r.setAttribute('aria-live', 'off');
        b.append(r);
      }
      row.append(b);
      return row;
    }

    /* -------------------------------------------- recall and edit (v1.2) */

    menuButton(m) {
      const btn = el('button', 'msg-menu-btn', '\u22ef');
      btn.type = 'button';
      btn.dataset.id = String(m.id);
      btn.setAttribute('aria-label', 'Message actions');
      btn.setAttribute('aria-haspopup', 'menu');
      btn.setAttribute('aria-expanded', 'false');
      return btn;
    }

    /* The bubble of id shows its new version (a recall or an edit came). */
    renderChanged(id) {
      const g = this.chat.groups.get(this.chat.openName);
      const row = this.log.querySelector(`.msg[data-id="${id}"]`);
      const m = g && g.log && g.log.find(id);
      if (!row || !m) return;
      if (this.editing && this.editing.id === id && m.recalled === true) this.stopEditing();
      row.replaceWith(this.messageNode(m, row.classList.contains('cont')));
    }

    closeMenu() {
      const open = this.log.querySelector('.msg-menu');
      if (!open) return;
      const btn = open.parentElement.querySelector('.msg-menu-btn');
      if (btn) btn.setAttribute('aria-expanded', 'false');
      open.remove();
    }

    onLogClick(e) {
      const item = e.target.closest('.msg-menu button[data-action]');
      if (item) {
        const id = Number(item.closest('.msg-menu').dataset.id);
        const action = item.dataset.action;
        this.closeMenu();
        if (action === 'edit') this.startEditing(id);
        else this.recallMessage(id);
        return;
      }
      const btn = e.target.closest('.msg-menu-btn');
      const wasOpen = btn && btn.getAttribute('aria-expanded') === 'true';
      this.closeMenu();
      if (!btn || wasOpen) return;
      const menu = el('div', 'msg-menu');
      menu.setAttribute('role', 'menu');
      menu.dataset.id = btn.dataset.id;
      for (const [action, label] of [['edit', 'Edit'], ['recall', 'Recall']]) {
        const b = el('button', '', label);
        b.type = 'button';
        b.dataset.action = action;
        b.setAttribute('role', 'menuitem');
        menu.append(b);
      }
      btn.setAttribute('aria-expanded', 'true');
      btn.parentElement.append(menu);
      menu.querySelector('button').focus();
    }

    async recallMessage(id) {
      const c = this.chat;
      try {
        await c.recall(c.openName, id);
      } catch (err) {
        this.notice('Cannot recall this message: ' + err.message, true);
      }
    }

    /* The composer edits message id: its text in the box, Enter saves,
     * Escape gives up. */
    startEditing(id) {
      const c = this.chat;
      const g = c.groups.get(c.openName);
      const m = g && g.log && g.log.find(id);
      if (!m || m.recalled === true) return;
      this.editing = { group: c.openName, id: id };
      this.input.value = typeof m.body === 'string' ? m.body : '';
      this.$('composer').classList.add('editing');
      this.$('composer-hint').textContent = 'Editing your message · Enter to save · Escape to cancel';
      this.fitInput();
      this.input.focus();
    }

    stopEditing() {
      this.editing = null;
      this.input.value = '';
      this.$('composer').classList.remove('editing');
      this.$('composer-hint').textContent = 'Enter to send · Shift+Enter for a new line';
      this.fitInput();
    }

    async saveEdit(text) {
      const c = this.chat;
      const { group, id } = this.editing;
      this.stopEditing();
      try {
        await c.edit(group, id, text);
      } catch (err) {
        this.notice('Cannot edit this message: ' + err.message, true);
      }
    }

    /* A group opened with unread messages shows the first of them at the
     * top, once it has arrived; with none, the newest at the bottom. */
    anchor() {
      const g = this.chat.groups.get(this.chat.openName);
      if (!this.anchorNew || !g || !g.log || !g.newFrom) {
        this.anchorNew = false;
        return;
      }
      if (g.log.msgs.length === 0 || g.log.hi < g.newFrom) return;
      const d = this.log.querySelector('.divider-new');
      if (d) d.scrollIntoView({ block: 'start' });
      else this.scroller.scrollTop = 0;
      this.anchorNew = false;
    }

    append(list) {
      if (!list.length) return;
      const g = this.chat.groups.get(this.chat.openName);
      const stick = this.nearBottom();
      const frag = document.createDocumentFragment();
      for (const m of list) this.addNode(frag, m, g);
      this.log.append(frag);
      if (this.anchorNew) {
        this.anchor();
      } else if (stick) {
        this.toBottom();
      } else if (g && !g.catching) {
        this.below += list.length;
        this.$('jump-text').textContent = this.below === 1 ? '1 new message' : this.below + ' new messages';
        this.$('jump').hidden = false;
      }
      this.renderTop();
    }

    /* Older messages arrived: render again, keeping what is on screen where
     * it was. */
    prepend() {
      const fromBottom = this.scroller.scrollHeight - this.scroller.scrollTop;
      this.log.setAttribute('aria-busy', 'true');
      this.rebuild();
      this.scroller.scrollTop = this.scroller.scrollHeight - fromBottom;
      this.anchor();
      this.log.setAttribute('aria-busy', 'false');
      this.fillUp();
    }

    renderPending(scroll) {
      const c = this.chat;
      const box = this.$('pending');
      const stick = scroll && this.nearBottom();
      const items = [];
      for (const e of c.openName ? c.pendingFor(c.openName) : []) {
        const failed = e.state === 'failed';
        const row = el('div', 'msg mine pending' + (failed ? ' failed' : ''));
        row.dataset.cid = e.cid;
        const b = el('div', 'bubble');
        const body = el('div', 'body');
        fillText(body, e.body);
        const state = failed ? 'Not sent' : e.state === 'stored' ? 'Sent' : 'Sending…';
        b.append(body, el('span', 'time', state));
        row.append(b);
        const wrap = el('div');
        wrap.append(row);
        if (failed) {
          const s = el('div', 'out-state');
          s.append(el('span', '', e.reason || 'not sent'));
          const retry = el('button', '', 'Retry');
          retry.type = 'button';
          retry.dataset.cid = e.cid;
          retry.dataset.action = 'retry';
          const drop = el('button', '', 'Discard');
          drop.type = 'button';
          drop.dataset.cid = e.cid;
          drop.dataset.action = 'discard';
          s.append(retry, drop);
          wrap.append(s);
        }
        items.push(wrap);
      }
      box.replaceChildren(...items);
      if (stick) this.toBottom();
    }

    notice(text, error) {
      const n = el('div', 'notice' + (error ? ' error' : ''), text);
      n.setAttribute('role', error ? 'alert' : 'status');
      this.log.append(n);
      if (this.nearBottom()) this.toBottom();
    }

    sendDraft() {
      const c = this.chat;
      const text = this.input.value;
      if (!c.openName || text.trim() === '') return;
      if (P.byteLength(text) > 60000) {
        this.notice('This message is too long to send.', true);
        return;
      }
      if (this.editing) {
        if (this.editing.group === c.openName) this.saveEdit(text.replace(/\s+$/, ''));
        else this.stopEditing();
        return;
      }
      c.send(c.openName, text.replace(/\s+$/, ''));
      this.input.value = '';
      this.fitInput();
      this.toBottom();
    }

    fitInput() {
      const t = this.input;
      t.style.height = 'auto';
      t.style.height = Math.min(t.scrollHeight, 160) + 'px';
    }

    nearBottom() {
      const s = this.scroller;
      return s.scrollHeight - s.scrollTop - s.clientHeight < NEAR_BOTTOM_PX;
    }

    toBottom() {
      this.scroller.scrollTop = this.scroller.scrollHeight;
      this.below = 0;
      this.$('jump').hidden = true;
    }

    onScroll() {
      if (this.nearBottom()) {
        this.below = 0;
        this.$('jump').hidden = true;
      }
      if (this.scroller.scrollTop < OLDER_TRIGGER_PX) this.older();
    }

    /* Loads older messages while the log does not fill the screen. */
    fillUp() {
      if (this.scroller.scrollHeight <= this.scroller.clientHeight + OLDER_TRIGGER_PX) this.older();
    }

    older() {
      const c = this.chat;
      const g = c.openName && c.groups.get(c.openName);
      if (!g || !g.log || g.olderDone || g.olderLoading || !c.connected || g.catching) return;
      const p = c.loadOlder(g.name);
      this.renderTop();
      p.catch((e) => this.notice('Cannot load older messages: ' + e.message, true))
        .finally(() => this.renderTop());
    }
  }

  MqChat.UI = UI;
})(typeof window !== 'undefined' ? window : globalThis);
