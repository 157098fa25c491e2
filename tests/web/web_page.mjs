// web_page.mjs: the page as web_e2e.mjs's cases see it: a page opened in a
// new browser context (signed in by the deep link), its script errors
// collected, and the waits and reads on what it shows (messages, who is
// online, the receipts under one's own messages, the group list). Every
// wait is bounded (WAIT_MS unless told).
import assert from 'node:assert/strict';

import { log } from './web_broker.mjs';

const WAIT_MS = 20_000; /* default bound of one wait in the page */

/* ------------------------------------------------------------------------
 * The page
 * ---------------------------------------------------------------------- */

const CONTEXT = { locale: 'en-GB', timezoneId: 'UTC', colorScheme: 'light' };

export async function openPage(browser, broker, user, hash, ctxOpts) {
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
  await page.goto(`http://127.0.0.1:${broker.httpPort}/?user=${encodeURIComponent(user)}${hash}`);
  return { ctx, page };
}
export const pageErrors = [];

export async function waitOnline(page) {
  await page.waitForSelector('body[data-conn="online"]');
}

/* The open group's messages as shown: id, sender, text. */
export function shown(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll('#log .msg')].map((e) => ({
      id: Number(e.dataset.id),
      from: e.dataset.from,
      body: e.querySelector('.body').textContent,
    })));
}

/* The open group is caught up: its header counts its messages. */
export async function waitSettled(page, n) {
  await waitCount(page, n);
  await page.waitForFunction((n) => document.getElementById('conv-sub').textContent === n + ' messages', n);
}

export async function waitCount(page, n, timeout = WAIT_MS) {
  await page.waitForFunction((n) => document.querySelectorAll('#log .msg').length >= n, n, { timeout });
}

/* Who the open group's header says is online (names, space-separated),
 * once it says "<k> of <n> online". */
export async function waitOnlineList(page, names, n) {
  await page.waitForFunction(([names, n]) => {
    const p = document.getElementById('conv-presence');
    const k = names ? names.split(' ').length : 0;
    return !p.hidden && p.dataset.online === names &&
      p.querySelector('.p-count').textContent === k + ' of ' + n + ' online';
  }, [names, n]);
}

/* The "read by" line under the page user's own message id. */
export async function waitReceipt(page, id, text) {
  await page.waitForFunction(([id, text]) => {
    const r = document.querySelector(`#log .msg.mine[data-id="${id}"] .receipts`);
    return r && r.textContent === text;
  }, [id, text]);
}

/* Each id once, ascending with no gap. */
export function assertContiguous(list, label) {
  for (let i = 1; i < list.length; i++) {
    assert.equal(list[i].id, list[i - 1].id + 1,
      `${label}: id ${list[i].id} follows ${list[i - 1].id} (at ${i})`);
  }
}

export async function groupLink(page, group) {
  return page.locator(`#group-list a.group[data-group="${group}"]`);
}
