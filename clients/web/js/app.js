/* app.js: starts the page. Chooses the broker (the one that served the
 * page, unless the operator's config.json next to it says otherwise), signs
 * in (from the form, or from the deep link /?user=<name>#<group>), picks this
 * tab's MQTT client id, and follows the URL fragment: #<group> opens that
 * group (joining it if it is open), an empty fragment shows the group list. */
(function (root) {
  'use strict';
  const MqChat = root.MqChat;
  const P = MqChat.proto;
  const $ = (id) => document.getElementById(id);

  const params = new URLSearchParams(location.search);
  /* The broker that served the page: its websockets listener. */
  const served = (location.protocol === 'https:' ? 'wss://' : 'ws://') +
    (location.host || '127.0.0.1:9001') + '/mqtt';
  /* Where a name and password go. Only to the broker that served the page,
   * or to one the operator named in config.json next to the page
   * ({"broker": <the default>, "brokers": [<others a link may name>]}):
   * a link's ?broker= naming any other is refused, or anyone could send a
   * link that makes the sign-in form hand a password to their own server. */
  let brokerUrl = served;
  let brokerRefused = null; /* a ?broker= the page would not use */

  /* A ws:// or wss:// URL as the browser writes it, or null. */
  function wsUrl(s) {
    try {
      const u = new URL(String(s));
      return u.protocol === 'ws:' || u.protocol === 'wss:' ? u.href : null;
    } catch (e) {
      return null;
    }
  }

  async function chooseBroker() {
    let conf = {};
    try {
      const r = await fetch('config.json', { cache: 'no-store' });
      if (r.ok) conf = await r.json();
    } catch (e) {
      /* no configuration: the broker that served the page */
    }
    const dflt = (conf && wsUrl(conf.broker)) || wsUrl(served) || served;
    const allowed = new Set([dflt, wsUrl(served)]);
    for (const b of conf && Array.isArray(conf.brokers) ? conf.brokers : []) {
      if (wsUrl(b)) allowed.add(wsUrl(b));
    }
    brokerUrl = dflt;
    const asked = params.get('broker');
    if (asked !== null) {
      if (allowed.has(wsUrl(asked))) brokerUrl = wsUrl(asked);
      else brokerRefused = asked;
    }
  }

  let chat = null;
  let ui = null;
  /* A sign-in waits for its client id with the form still shown: another
   * Enter meanwhile is ignored, or two Chats would start and the refusal of
   * the first would end the second. */
  let signingIn = false;
  let slot = null; /* { user, id, release }: the client id this tab holds */

  function store(key, value) {
    try {
      if (value === undefined) return localStorage.getItem(key);
      localStorage.setItem(key, value);
    } catch (e) {
      /* private mode without storage: nothing is remembered */
    }
    return null;
  }

  /* The MQTT client id: <name>-web-<random>, the random part kept in
   * localStorage so that this browser stays one device (its cursors survive
   * reloads). A second tab open at the same time must not take over the
   * first one's connection: it takes the next free slot (<id>-2, -3, ...),
   * held through the Web Locks API for as long as the tab lives. The tab
   * keeps it across sign-outs and sign-ins under the same name (taking a
   * new slot each time would make every sign-in a new device), and frees it
   * when it signs in under another name. Without Web Locks (plain http on
   * a host other than localhost) each tab is a device of its own, kept
   * across its reloads in sessionStorage. */
  async function clientId(user) {
    if (slot && slot.user === user) return slot.id;
    if (slot) slot.release();
    slot = null;
    let base = store('mqchat.device');
    if (!base || !/^[a-z0-9]{6,32}$/.test(base)) {
      base = MqChat.randomId(10);
      store('mqchat.device', base);
    }
    const id = user + '-web-' + base;
    if (navigator.locks && navigator.locks.request) {
      for (let n = 1; n <= 32; n++) {
        const release = await new Promise((resolve) => {
          navigator.locks.request('mqchat:' + id + ':' + n, { ifAvailable: true }, (lock) => {
            if (!lock) {
              resolve(null);
              return undefined;
            }
            return new Promise((done) => resolve(done)); /* held until released */
          }).catch(() => resolve(null));
        });
        if (release) {
          slot = { user: user, id: n === 1 ? id : id + '-' + n, release: release };
          return slot.id;
        }
      }
    }
    let tab = null;
    try {
      tab = sessionStorage.getItem('mqchat.tab');
      if (!tab) {
        tab = MqChat.randomId(6);
        sessionStorage.setItem('mqchat.tab', tab);
      }
    } catch (e) {
      tab = MqChat.randomId(6);
    }
    return id + '-' + tab;
  }

  function hashGroup() {
    const h = location.hash.slice(1);
    if (!h) return null;
    try {
      return decodeURIComponent(h);
    } catch (e) {
      return h;
    }
  }

  function showSignIn(name, error) {
    $('app').hidden = true;
    $('signin').hidden = false;
    document.body.dataset.conn = 'signed-out';
    $('signin-broker').textContent = brokerUrl;
    $('signin-name').value = name || store('mqchat.user') || '';
    $('signin-error').textContent = error || (brokerRefused
      ? 'This link names the broker ' + brokerRefused + ', which this page is not set up to ' +
        'use: your name and password would go to ' + brokerUrl + '.'
      : '');
    if (error && name) $('signin-password').focus();
    else $('signin-name').focus();
  }

  function stopChat() {
    if (chat) chat.stop();
    if (ui) ui.destroy();
    chat = ui = null;
  }

  function signOut(keepName) {
    stopChat();
    const q = new URLSearchParams(location.search);
    q.delete('user');
    const qs = q.toString();
    history.replaceState(null, '', location.pathname + (qs ? '?' + qs : '') + location.hash);
    if (!keepName) store('mqchat.user', '');
  }

  async function signIn(user, password) {
    if (!root.mqtt) {
      showSignIn(user, 'MQTT.js is missing next to the page: run scripts/web-deps.');
      return;
    }
    if (P.byteLength(user) > 1024) {
      showSignIn(user, 'That name is too long.');
      return;
    }
    store('mqchat.user', user);
    signingIn = true;
    let id;
    try {
      id = await clientId(user);
    } finally {
      signingIn = false;
    }
    stopChat();
    const mine = (chat = new MqChat.Chat({
      url: brokerUrl, user: user, password: password, clientId: id, mqtt: root.mqtt,
    }));
    chat.visible = document.visibilityState !== 'hidden';
    chat.addEventListener('status', (e) => {
      /* A Chat already signed out must not sign out the one after it. */
      if (e.detail.state !== 'refused' || chat !== mine) return;
      signOut(true);
      showSignIn(user, e.detail.detail + (password ? '' : ' If it needs a password, enter it here.'));
    });
    $('signin').hidden = true;
    $('app').hidden = false;
    ui = new MqChat.UI(chat, user);
    if (!password) {
      /* A reload (or a shared link) signs in again as the same member. */
      const q = new URLSearchParams(location.search);
      q.set('user', user);
      history.replaceState(null, '', location.pathname + '?' + q.toString() + location.hash);
    }
    chat.start();
    route();
  }

  function route() {
    if (!chat) return;
    const g = hashGroup();
    if (g) {
      chat.open(g).catch((e) => chat.emit('error', { group: g, message: e.message }));
    } else {
      chat.close();
    }
  }

  async function boot() {
    await chooseBroker();
    $('signin-form').addEventListener('submit', (e) => {
      e.preventDefault();
      if (signingIn) return;
      const name = $('signin-name').value.trim();
      if (!name) {
        $('signin-error').textContent = 'Please enter your name.';
        $('signin-name').focus();
        return;
      }
      const pw = $('signin-password').value;
      $('signin-password').value = '';
      /* The last attempt's error goes: what shows next is this one's. */
      $('signin-error').textContent = '';
      signIn(name, pw);
    });
    $('signout').addEventListener('click', () => {
      signOut(false);
      showSignIn('', '');
    });
    addEventListener('hashchange', route);
    document.addEventListener('visibilitychange', () => {
      if (chat) chat.setVisible(document.visibilityState !== 'hidden');
    });
    /* Acks of what was read go out before the tab goes away. */
    addEventListener('pagehide', () => {
      if (chat) for (const g of chat.groups.values()) chat.ackNow(g);
    });
    const user = params.get('user');
    /* A link whose broker was refused shows the form, and why, first. */
    if (user && user.trim() && !brokerRefused) signIn(user.trim(), '');
    else showSignIn(user ? user.trim() : '', '');
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', boot);
  else boot();
})(typeof window !== 'undefined' ? window : globalThis);
