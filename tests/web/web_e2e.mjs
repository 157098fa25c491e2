// web_e2e.mjs: end-to-end tests of the web chat page (clients/web) in a real
// browser: Debian's chromium, headless, driven by playwright-core, against a
// real mosquitto with the real plugin that serves the page itself (http_dir
// on a websockets listener) on free loopback ports, with a temporary store.
//
//   1. two people chat in one group: both see every message once, in order;
//      each sees the other online, and "Read by everyone" under their own
//      messages; the connection drops (the broker is killed and restarted):
//      the page says so, and a message written meanwhile goes out once when
//      it is back;
//   2. one closes the page (the other sees them go offline, and the new
//      messages unread); 300 messages come from a Paho C client (mqchat);
//      the page reopens, shows 300 unread, opens the group with the keyboard
//      and shows all 300 once, in order, and the other sees them online and
//      read again;
//   3. screenshots at 1280x800 and 360x640 (web.png, web-phone.png);
//   4. a broker with a password_file: refused without a password and with a
//      wrong one, the form says so; with the right one the page works, and
//      the tab is still the same device (MQTT client id) as at first.
//
//   node tests/web/web_e2e.mjs --mosquitto /usr/sbin/mosquitto \
//     --plugin build/plugin/mosquitto_chat.so --mqchat build/clients/mqchat \
//     --web clients/web --shots build/web-shots [--chromium /usr/bin/chromium]
// (ctest runs it as web_e2e; CHAT_WEB_SHOTS=<dir> overrides --shots.)
//
// CHAT_BROKER_PRELOAD, when set, becomes the broker's LD_PRELOAD (an
// AddressSanitizer plugin in an uninstrumented broker). Every wait is
// bounded; the whole run is bounded by WATCHDOG_MS.
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const WATCHDOG_MS = 170_000;
const WAIT_MS = 20_000; /* default bound of one wait in the page */
const T0 = Date.now();

function log(...a) {
  console.log(`[${((Date.now() - T0) / 1000).toFixed(1)}s]`, ...a);
}

function parseArgs(argv) {
  const o = { chromium: process.env.CHROMIUM || '/usr/bin/chromium' };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i];
    if (!k.startsWith('--') || i + 1 >= argv.length) throw new Error('bad argument ' + k);
    o[k.slice(2)] = argv[i + 1];
  }
  for (const k of ['mosquitto', 'plugin', 'mqchat', 'web', 'shots']) {
    if (!o[k]) throw new Error('missing --' + k);
  }
  /* CHAT_WEB_SHOTS=docs refreshes the README's screenshots. */
  if (process.env.CHAT_WEB_SHOTS) o.shots = process.env.CHAT_WEB_SHOTS;
  return o;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/* ------------------------------------------------------------------------
 * The broker
 * ---------------------------------------------------------------------- */

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.setTimeout(500);
    s.on('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
    s.on('timeout', () => {
      s.destroy();
      resolve(false);
    });
  });
}

function httpGet(port, p) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: p, timeout: 1000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', () => resolve({ status: 0, body: '' }));
    req.on('timeout', () => {
      req.destroy();
      resolve({ status: 0, body: '' });
    });
  });
}

class Broker {
  /* extra: more mosquitto.conf lines */
  constructor(dir, opts, extra = []) {
    this.dir = dir;
    this.opts = opts;
    this.extra = extra;
    this.conf = path.join(dir, 'mosquitto.conf');
    this.logFile = path.join(dir, 'mosquitto.log');
    this.db = path.join(dir, 'db');
    this.proc = null;
    fs.mkdirSync(this.db, { recursive: true });
  }

  writeConf() {
    const lines = [
      '# Written by tests/web/web_e2e.mjs.',
      `listener ${this.port} 127.0.0.1`,
      `listener ${this.wsPort} 127.0.0.1`,
      'protocol websockets',
      `http_dir ${path.resolve(this.opts.web)}`,
      ...(this.extra.length ? this.extra : ['allow_anonymous true']),
      'set_tcp_nodelay true',
      'persistence false',
      `log_dest file ${this.logFile}`,
      'log_type all',
      `plugin ${path.resolve(this.opts.plugin)}`,
      `plugin_opt_db_path ${this.db}`,
    ];
    /* Run as root (CI), mosquitto would drop to "mosquitto", which cannot
     * write the temporary store. */
    if (process.getuid && process.getuid() === 0) lines.push('user root');
    fs.writeFileSync(this.conf, lines.join('\n') + '\n');
  }

  launch() {
    const env = { ...process.env };
    if (process.env.CHAT_BROKER_PRELOAD) {
      env.LD_PRELOAD = process.env.CHAT_BROKER_PRELOAD;
      /* Mosquitto 2.0.11 never frees what mosq_websockets_init allocates for
       * http_dir (4 KiB, once): not ours, so suppressed by name, which
       * LeakSanitizer sees only with the slow (full) unwinder. Everything
       * else, the plugin's allocations included, stays checked. */
      const supp = path.join(this.dir, 'lsan.supp');
      fs.writeFileSync(supp, 'leak:mosq_websockets_init\n');
      env.LSAN_OPTIONS = [process.env.LSAN_OPTIONS, 'suppressions=' + supp].filter(Boolean).join(':');
      env.ASAN_OPTIONS = [process.env.ASAN_OPTIONS, 'fast_unwind_on_malloc=0'].filter(Boolean).join(':');
    }
    const out = fs.openSync(path.join(this.dir, 'broker.out'), 'a');
    this.proc = spawn(this.opts.mosquitto, ['-c', this.conf], { env, stdio: ['ignore', out, out] });
    fs.closeSync(out);
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, sig) => resolve({ code, sig })));
    this.proc.on('exit', () => (this.proc = null));
  }

  /* Starts on this.port/this.wsPort; false if it exited at start. */
  async startOnPorts() {
    this.launch();
    const deadline = Date.now() + 20_000; /* sanitizer builds start slowly */
    while (Date.now() < deadline) {
      if (!this.proc) return false;
      if ((await canConnect(this.port)) && (await httpGet(this.wsPort, '/')).status === 200) return true;
      await sleep(50);
    }
    throw new Error(`broker not ready on ${this.port}/${this.wsPort} after 20 s\n${this.tail()}`);
  }

  async start() {
    for (let attempt = 0; attempt < 5; attempt++) {
      this.port = await freePort();
      this.wsPort = await freePort();
      this.writeConf();
      if (await this.startOnPorts()) {
        log(`broker pid ${this.proc.pid}: mqtt 127.0.0.1:${this.port}, http+ws 127.0.0.1:${this.wsPort}`);
        return;
      }
      log('broker exited at start, trying other ports\n' + this.tail());
    }
    throw new Error('broker did not start in 5 attempts');
  }

  async kill() {
    if (!this.proc) return;
    const pid = this.proc.pid;
    this.proc.kill('SIGKILL');
    await this.exited;
    log(`broker pid ${pid} killed with SIGKILL`);
  }

  async restart() {
    for (let attempt = 0; attempt < 20; attempt++) {
      if (await this.startOnPorts()) {
        log(`broker restarted, pid ${this.proc.pid}`);
        return;
      }
      await sleep(250); /* the ports were ours a moment ago */
    }
    throw new Error('broker did not restart\n' + this.tail());
  }

  async stop() {
    if (!this.proc) return;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc && this.proc.kill('SIGKILL'), 5000);
    const { code, sig } = await this.exited;
    clearTimeout(t);
    if (code !== 0) throw new Error(`broker exited with ${code ?? sig}\n${this.tail()}`);
  }

  tail() {
    let s = '';
    for (const f of [path.join(this.dir, 'broker.out'), this.logFile]) {
      try {
        s += `--- ${f} (tail)\n` + fs.readFileSync(f, 'utf8').split('\n').slice(-40).join('\n') + '\n';
      } catch (e) {
        /* not written yet */
      }
    }
    return s;
  }
}

/* mqchat (Paho MQTT C): resolves with its exit code and output. */
function mqchat(opts, broker, args, input, timeoutMs = 30_000) {
  return new Promise((resolve, reject) => {
    const p = spawn(opts.mqchat, ['-h', '127.0.0.1', '-p', String(broker.port), '--quiet', ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    const t = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`mqchat ${args.join(' ')}: no exit after ${timeoutMs} ms`));
    }, timeoutMs);
    p.on('error', reject);
    p.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, out, err });
    });
    p.stdin.end(input || '');
  });
}

async function mqchatOk(opts, broker, args, input) {
  const r = await mqchat(opts, broker, args, input);
  assert.equal(r.code, 0, `mqchat ${args.join(' ')} exited ${r.code}: ${r.err}`);
  return r;
}

/* ------------------------------------------------------------------------
 * The page
 * ---------------------------------------------------------------------- */

const CONTEXT = { locale: 'en-GB', timezoneId: 'UTC', colorScheme: 'light' };

async function openPage(browser, broker, user, hash, ctxOpts) {
  const ctx = await browser.newContext({ ...CONTEXT, viewport: { width: 1280, height: 800 }, ...ctxOpts });
  const page = await ctx.newPage();
  page.setDefaultTimeout(WAIT_MS);
  page.on('pageerror', (e) => {
    log(`${user}: page error: ${e.message}`);
    pageErrors.push(`${user}: ${e.message}`);
  });
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') log(`${user}: console ${m.type()}: ${m.text()}`);
  });
  await page.goto(`http://127.0.0.1:${broker.wsPort}/?user=${encodeURIComponent(user)}${hash}`);
  return { ctx, page };
}
const pageErrors = [];

async function waitOnline(page) {
  await page.waitForSelector('body[data-conn="online"]');
}

/* The open group's messages as shown: id, sender, text. */
function shown(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll('#log .msg')].map((e) => ({
      id: Number(e.dataset.id),
      from: e.dataset.from,
      body: e.querySelector('.body').textContent,
    })));
}

/* The open group is caught up: its header counts its messages. */
async function waitSettled(page, n) {
  await waitCount(page, n);
  await page.waitForFunction((n) => document.getElementById('conv-sub').textContent === n + ' messages', n);
}

async function waitCount(page, n, timeout = WAIT_MS) {
  await page.waitForFunction((n) => document.querySelectorAll('#log .msg').length >= n, n, { timeout });
}

/* Who the open group's header says is online (names, space-separated),
 * once it says "<k> of <n> online". */
async function waitOnlineList(page, names, n) {
  await page.waitForFunction(([names, n]) => {
    const p = document.getElementById('conv-presence');
    const k = names ? names.split(' ').length : 0;
    return !p.hidden && p.dataset.online === names &&
      p.querySelector('.p-count').textContent === k + ' of ' + n + ' online';
  }, [names, n]);
}

/* The "read by" line under the page user's own message id. */
async function waitReceipt(page, id, text) {
  await page.waitForFunction(([id, text]) => {
    const r = document.querySelector(`#log .msg.mine[data-id="${id}"] .receipts`);
    return r && r.textContent === text;
  }, [id, text]);
}

/* Each id once, ascending with no gap. */
function assertContiguous(list, label) {
  for (let i = 1; i < list.length; i++) {
    assert.equal(list[i].id, list[i - 1].id + 1,
      `${label}: id ${list[i].id} follows ${list[i - 1].id} (at ${i})`);
  }
}

async function groupLink(page, group) {
  return page.locator(`#group-list a.group[data-group="${group}"]`);
}

/* ------------------------------------------------------------------------
 * Scenarios
 * ---------------------------------------------------------------------- */

async function twoPeopleChat(browser, broker) {
  log('1: alice and bob chat in room1');
  const a = await openPage(browser, broker, 'alice', '#room1');
  const b = await openPage(browser, broker, 'bob', '#room1');
  for (const p of [a.page, b.page]) {
    await waitOnline(p);
    await (await groupLink(p, 'room1')).and(p.locator('[aria-current="page"]')).waitFor();
    await p.waitForSelector('#log-top:has-text("No messages yet")');
  }

  /* What assistive technology and keyboard users rely on. */
  const logEl = a.page.getByRole('log');
  assert.equal(await logEl.getAttribute('aria-live'), 'polite');
  const box = a.page.getByRole('textbox', { name: 'Message' });
  assert.equal(await box.evaluate((e) => e.tagName), 'TEXTAREA');
  await a.page.getByRole('button', { name: 'Send' }).waitFor();

  /* Both type at once: alice with Enter, bob with the Send button; one of
   * alice's messages has a second line (Shift+Enter). */
  const N = 10;
  const alice = (async () => {
    const input = a.page.getByRole('textbox', { name: 'Message' });
    for (let i = 1; i <= N; i++) {
      await input.focus();
      if (i === 5) {
        await a.page.keyboard.type('alice 5');
        await a.page.keyboard.press('Shift+Enter');
        await a.page.keyboard.type('second line');
      } else {
        await input.fill(`alice ${i}`);
      }
      await a.page.keyboard.press('Enter');
    }
  })();
  const bob = (async () => {
    const input = b.page.getByRole('textbox', { name: 'Message' });
    const send = b.page.getByRole('button', { name: 'Send' });
    for (let i = 1; i <= N; i++) {
      await input.fill(`bob ${i}`);
      await send.click();
    }
  })();
  await Promise.all([alice, bob]);
  assert.equal(await box.inputValue(), '', 'the composer is emptied after sending');

  await waitCount(a.page, 2 * N);
  await waitCount(b.page, 2 * N);
  await a.page.waitForTimeout(300); /* nothing more may come */
  const la = await shown(a.page);
  const lb = await shown(b.page);
  assert.equal(la.length, 2 * N, 'alice sees each message once');
  assert.deepEqual(lb, la, 'bob sees the same messages, in the same order');
  assertContiguous(la, 'room1');
  assert.equal(la[0].id, 1);
  const byA = la.filter((m) => m.from === 'alice').map((m) => m.body);
  const byB = la.filter((m) => m.from === 'bob').map((m) => m.body);
  assert.deepEqual(byA, Array.from({ length: N }, (_, i) => (i === 4 ? 'alice 5\nsecond line' : `alice ${i + 1}`)));
  assert.deepEqual(byB, Array.from({ length: N }, (_, i) => `bob ${i + 1}`));
  for (const p of [a.page, b.page]) {
    await p.waitForFunction(() => document.querySelectorAll('#pending .msg').length === 0);
  }
  assert.equal(await a.page.locator('#log .msg.mine').count(), N, 'alice\'s own messages are marked as hers');
  log(`1: ${la.length} messages, the same on both pages`);

  /* v1.1: both are online in room1, and each has read everything. */
  await waitOnlineList(a.page, 'alice bob', 2);
  await waitOnlineList(b.page, 'alice bob', 2);
  const lastA = la.filter((m) => m.from === 'alice').pop().id;
  const lastB = la.filter((m) => m.from === 'bob').pop().id;
  await waitReceipt(a.page, lastA, 'Read by everyone');
  await waitReceipt(b.page, lastB, 'Read by everyone');
  assert.equal(await b.page.locator('#log .msg:not(.mine) .receipts').count(), 0,
    'receipts only under one\'s own messages');
  log('1: both online, each one\'s messages read by the other');

  log('1b: the broker goes away and comes back');
  await broker.kill();
  await a.page.waitForSelector('body[data-conn="reconnecting"]');
  await a.page.waitForSelector('#banner:not([hidden])');
  assert.match(await a.page.locator('#banner').textContent(), /Reconnecting/);
  await box.fill('written while offline');
  await box.press('Enter');
  await a.page.waitForSelector('#pending .msg:has-text("written while offline")');
  await broker.restart();
  for (const p of [a.page, b.page]) {
    await p.waitForSelector('body[data-conn="online"]', { timeout: 40_000 });
    await p.waitForSelector('#banner', { state: 'hidden' });
    await waitCount(p, 2 * N + 1);
    await p.waitForFunction(() => document.querySelectorAll('#pending .msg').length === 0);
  }
  await a.page.waitForTimeout(300);
  const la2 = await shown(a.page);
  const lb2 = await shown(b.page);
  assert.equal(la2.length, 2 * N + 1);
  assert.deepEqual(lb2, la2);
  assertContiguous(la2, 'room1 after the restart');
  assert.deepEqual(la2[2 * N], { id: 2 * N + 1, from: 'alice', body: 'written while offline' });
  log('1b: the message written offline arrived once, on both pages');
  return { a, b, head: 2 * N + 1 };
}

async function catchUp300(browser, broker, opts, s) {
  log('2: bob closes the page; 300 messages come from mqchat (Paho)');
  const { b } = s;
  const link = await groupLink(b.page, 'room1');
  /* His acks are out: the broker keeps his place. */
  await b.page.waitForFunction((head) => {
    const a = document.querySelector('#group-list a.group[data-group="room1"]');
    return a && Number(a.dataset.acked) === head;
  }, s.head);
  assert.equal(await link.getAttribute('data-unread'), '0');
  const state = await b.ctx.storageState();
  await b.ctx.close();
  await waitOnlineList(s.a.page, 'alice', 2);
  log('2: alice sees bob go offline');

  const lines = Array.from({ length: 300 }, (_, i) => `msg ${String(i + 1).padStart(3, '0')}`);
  await mqchatOk(opts, broker, ['-u', 'alice', 'send', '-l', 'room1'], lines.join('\n') + '\n');
  const head = s.head + 300;
  await waitCount(s.a.page, head, 30_000); /* alice, still there, gets them live */
  const la = await shown(s.a.page);
  assert.equal(la.length, head);
  assertContiguous(la, 'alice live');
  assert.deepEqual(la.slice(s.head).map((m) => m.body), lines);

  log('2: bob comes back (same browser storage, so the same device)');
  const b2 = await openPage(browser, broker, 'bob', '', { storageState: state });
  await waitOnline(b2.page);
  const link2 = await groupLink(b2.page, 'room1');
  await link2.locator('.badge').waitFor();
  await b2.page.waitForFunction(() => {
    const e = document.querySelector('#group-list a.group[data-group="room1"] .badge');
    return e && e.textContent === '300';
  });
  assert.equal(await link2.getAttribute('data-unread'), '300');
  assert.equal(await b2.page.locator('#log .msg').count(), 0, 'nothing is fetched before he opens the group');

  /* Opens it with the keyboard alone. */
  await link2.focus();
  await b2.page.keyboard.press('Enter');
  await b2.page.waitForFunction((head) => {
    const m = document.querySelectorAll('#log .msg');
    return m.length > 0 && Number(m[m.length - 1].dataset.id) === head;
  }, head, { timeout: 30_000 });
  await b2.page.waitForTimeout(300);
  const lb = await shown(b2.page);
  assertContiguous(lb, 'bob after catching up');
  const fresh = lb.filter((m) => m.id > s.head);
  assert.equal(fresh.length, 300, 'all 300, each once');
  assert.deepEqual(fresh.map((m) => m.body), lines, 'in order');
  assert.ok(fresh.every((m) => m.from === 'alice'));
  /* While bob was away his marker stayed where it was; now it follows
   * him, on alice's page too. */
  await waitOnlineList(s.a.page, 'alice bob', 2);
  await waitReceipt(s.a.page, head, 'Read by everyone');
  const first = await b2.page.evaluate(() => {
    const d = document.querySelector('#log .divider-new');
    const next = d && d.nextElementSibling;
    return next ? Number(next.dataset.id) : 0;
  });
  assert.equal(first, s.head + 1, '"New messages" marks the first unread one');
  await b2.page.waitForFunction((head) => {
    const a = document.querySelector('#group-list a.group[data-group="room1"]');
    return a && Number(a.dataset.acked) === head && a.dataset.unread === '0';
  }, head);
  log(`2: bob saw 300 unread and then all 300 once, in order (${lb.length} shown with context)`);
  await b2.ctx.close();
}

async function screenshots(browser, broker, opts, a) {
  log('3: screenshots');
  /* maya is a member of three groups; her friends write in them. */
  for (const g of ['design', 'general', 'weekend']) await mqchatOk(opts, broker, ['-u', 'maya', 'join', g]);
  const say = (who, g, text) => mqchatOk(opts, broker, ['-u', who, 'send', g, text]);
  await say('sam', 'general', 'The coffee machine on the third floor works again.');
  await say('priya', 'weekend', 'Who is up for a hike on Saturday?');
  await say('leo', 'design', 'Morning! The new onboarding mockups are in the shared folder.');
  await say('priya', 'design', 'Nice, the progress bar on step 2 reads much better now.');
  await say('maya', 'design', 'Agreed. Can we try the illustration a bit smaller on phones?');
  await say('leo', 'design', 'Sure, I will make a 360 px variant this afternoon.');
  await say('sam', 'design', 'Reminder: the design review is at 15:00 in the big room.');
  await say('maya', 'design', 'Thanks Sam! I will bring the usability notes.');
  await say('leo', 'design', 'Prototype: https://example.com/proto/onboarding-v3');
  await say('priya', 'design', 'Looks great. Beta group tomorrow?');
  await say('maya', 'design', 'Works for me.\nI will write the release notes tonight.');
  await say('leo', 'weekend', 'Count me in if it does not rain.');
  await say('priya', 'general', 'Best news all week.');

  /* leo and priya read it all (mqchat listen marks what it prints as
   * read), sam stays online while the pictures are taken. */
  const state = (who) => path.join(broker.dir, `${who}.state`);
  await mqchatOk(opts, broker, ['-u', 'leo', '--state', state('leo'), '-C', '9', '-W', '20', 'listen', 'design']);
  await mqchatOk(opts, broker, ['-u', 'priya', '--state', state('priya'), '-C', '8', '-W', '20', 'listen', 'design']);
  const sam = spawn(opts.mqchat, ['-h', '127.0.0.1', '-p', String(broker.port), '--quiet', '-u', 'sam',
    '--state', state('sam'), '--no-read', '-W', '60', 'listen', 'design'], { stdio: 'ignore' });

  fs.mkdirSync(opts.shots, { recursive: true });
  const desk = await openPage(browser, broker, 'maya', '#design');
  await waitOnline(desk.page);
  await waitSettled(desk.page, 9);
  await waitOnlineList(desk.page, 'maya sam', 4);
  await waitReceipt(desk.page, 9, 'Read by 2 of 3');
  await desk.page.waitForFunction(() => document.querySelectorAll('#group-list .badge').length === 2);
  /* Opened with everything unread, the page starts at the first message;
   * the picture shows the conversation read down to the newest. */
  await desk.page.evaluate(() => {
    const s = document.getElementById('scroller');
    s.scrollTop = s.scrollHeight;
    return document.fonts.ready;
  });
  await desk.page.screenshot({ path: path.join(opts.shots, 'web.png') });

  const phone = await openPage(browser, broker, 'maya', '#design', {
    viewport: { width: 360, height: 640 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true,
  });
  await waitOnline(phone.page);
  await waitSettled(phone.page, 9);
  assert.ok(await phone.page.locator('.sidebar').isHidden(), 'one column on a phone');
  const width = await phone.page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 360, `nothing wider than the phone (${width}px)`);
  await phone.page.evaluate(() => document.fonts.ready);
  await phone.page.screenshot({ path: path.join(opts.shots, 'web-phone.png') });
  log(`3: ${opts.shots}/web.png, ${opts.shots}/web-phone.png`);
  sam.kill('SIGTERM');
  await desk.ctx.close();
  await phone.ctx.close();
  await a.ctx.close();
}

/* A line of a Mosquitto 2.0 password_file ($7$: PBKDF2-SHA512, as
 * mosquitto_passwd writes it). */
function passwordLine(user, password) {
  const salt = crypto.randomBytes(12);
  const hash = crypto.pbkdf2Sync(password, salt, 101, 64, 'sha512');
  return `${user}:$7$101$${salt.toString('base64')}$${hash.toString('base64')}\n`;
}

async function password(browser, opts, dir) {
  log('4: a broker that asks for a password');
  const pwfile = path.join(dir, 'passwd');
  fs.writeFileSync(pwfile, passwordLine('dana', 'correct horse'));
  const broker = new Broker(dir, opts, ['allow_anonymous false', `password_file ${pwfile}`]);
  await broker.start();
  try {
    const { ctx, page } = await openPage(browser, broker, 'dana', '#room9');
    /* Refused without a password: back to the form, the name kept. */
    await page.waitForSelector('#signin:not([hidden])');
    assert.equal(await page.inputValue('#signin-name'), 'dana');
    assert.match(await page.textContent('#signin-error'), /refused/);
    /* The page empties the error when the form is sent, so the wait below
     * sees this attempt's refusal, not the one before it. */
    await page.fill('#signin-password', 'wrong');
    await page.press('#signin-password', 'Enter');
    await page.waitForSelector('#signin:not([hidden]) #signin-error:has-text("refused")');
    await page.fill('#signin-password', 'correct horse');
    await page.press('#signin-password', 'Enter');
    await waitOnline(page);
    const seen = fs.readFileSync(broker.logFile, 'utf8');
    assert.equal((seen.match(/Sending CONNACK to \S+ \(0, 13[45]\)/g) || []).length, 2,
      'two connections refused, no more');
    const device = await page.evaluate(() => localStorage.getItem('mqchat.device'));
    assert.match(seen, new RegExp(`connected from \\S+ as dana-web-${device} \\(`),
      'the third sign-in in the tab is the same device as the first');
    assert.ok(!page.url().includes('user='), 'a password sign-in leaves no auto sign-in link');
    await (await groupLink(page, 'room9')).and(page.locator('[aria-current="page"]')).waitFor();
    await page.getByRole('textbox', { name: 'Message' }).fill('signed in with a password');
    await page.keyboard.press('Enter');
    await waitCount(page, 1);
    assert.deepEqual(await shown(page), [{ id: 1, from: 'dana', body: 'signed in with a password' }]);
    await ctx.close();
    await broker.stop();
    log('4: refused without and with a wrong password, then in');
  } catch (e) {
    log(broker.tail());
    throw e;
  } finally {
    if (broker.proc) broker.proc.kill('SIGKILL');
  }
}

/* ------------------------------------------------------------------------ */

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  for (const f of [opts.mosquitto, opts.plugin, opts.mqchat, opts.chromium]) {
    if (!fs.existsSync(f)) throw new Error(`${f} is missing (scripts/web-deps --test installs chromium)`);
  }
  if (!fs.existsSync(path.join(opts.web, 'vendor/mqtt.min.js'))) {
    throw new Error(`${opts.web}/vendor/mqtt.min.js is missing: run scripts/web-deps`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mqchat-web-'));
  const broker = new Broker(dir, opts);
  let browser = null;
  let ok = false;
  const watchdog = setTimeout(() => {
    log(`FAIL: still running after ${WATCHDOG_MS} ms\n${broker.tail()}`);
    if (broker.proc) broker.proc.kill('SIGKILL');
    process.exit(1);
  }, WATCHDOG_MS);
  try {
    await broker.start();
    browser = await chromium.launch({
      executablePath: opts.chromium,
      headless: true,
      /* Playwright gives each launch a new, empty --user-data-dir. The
       * network flags keep Chromium from calling home: the test machine has
       * no network but loopback. */
      args: [
        '--no-sandbox', '--disable-gpu', '--disable-background-networking',
        '--disable-component-update', '--no-first-run', '--disable-quic', '--disable-sync',
        '--disable-dev-shm-usage',
      ],
      timeout: 30_000,
    });
    log(`chromium ${browser.version()}`);
    const s = await twoPeopleChat(browser, broker);
    await catchUp300(browser, broker, opts, s);
    await screenshots(browser, broker, opts, s.a);
    await broker.stop();
    const pwDir = path.join(dir, 'password');
    fs.mkdirSync(pwDir);
    await password(browser, opts, pwDir);
    assert.deepEqual(pageErrors, [], 'no script errors in the page');
    await browser.close();
    browser = null;
    ok = true;
    log('all web tests passed');
  } catch (e) {
    log('FAIL: ' + (e.stack || e));
    log(broker.tail());
  } finally {
    clearTimeout(watchdog);
    if (browser) await browser.close().catch(() => {});
    if (broker.proc) broker.proc.kill('SIGKILL');
    if (ok) fs.rmSync(dir, { recursive: true, force: true });
    else log(`kept ${dir}`);
  }
  process.exit(ok ? 0 : 1);
}

main();
