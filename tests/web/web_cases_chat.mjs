// web_cases_chat.mjs: web_e2e.mjs's cases 1 and 2: two people chat in one
// group through a broker restart; one leaves, 300 messages come from
// mqchat, and they come back to 300 unread and catch up on them.
import assert from 'node:assert/strict';

import { log, mqchatOk } from './web_broker.mjs';
import {
  assertContiguous, groupLink, openPage, shown, waitCount, waitOnline, waitOnlineList, waitReceipt,
} from './web_page.mjs';

/* ------------------------------------------------------------------------
 * Scenarios
 * ---------------------------------------------------------------------- */

export async function twoPeopleChat(browser, broker) {
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
  /* Issue 25, item 10: while its own connection is down, the page does not
   * know who is online: it no longer says "2 of 2 online". */
  await a.page.waitForSelector('#conv-presence', { state: 'hidden' });
  await box.fill('written while offline');
  await box.press('Enter');
  await a.page.waitForSelector('#pending .msg:has-text("written while offline")');
  await broker.restart();
  for (const p of [a.page, b.page]) {
    await p.waitForSelector('body[data-conn="online"]', { timeout: 40_000 });
    await p.waitForSelector('#banner', { state: 'hidden' });
    await waitCount(p, 2 * N + 1);
    /* ... and says it again once connected */
    await waitOnlineList(p, 'alice bob', 2);
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

export async function catchUp300(browser, broker, opts, s) {
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
