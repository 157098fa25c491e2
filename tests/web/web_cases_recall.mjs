// web_cases_recall.mjs: web_e2e.mjs's case 5, recall and edit (protocol
// v1.2) in the page: alice recalls and edits her messages from the menu on
// her own bubbles; on bob's page, open meanwhile, the bubbles change in
// place ("Message recalled", the new text and "edited"), and so they are
// when he opens the page again (what the store holds). Bob has no menu on
// alice's messages, nor alice on a recalled one.
import assert from 'node:assert/strict';
import path from 'node:path';

import { log } from './web_broker.mjs';
import { openPage, shown, waitCount, waitOnline } from './web_page.mjs';

const GROUP = 'plans';

/* The bubble of id as the page shows it. */
function bubble(page, id) {
  return page.evaluate((id) => {
    const row = document.querySelector(`#log .msg[data-id="${id}"]`);
    if (!row) return null;
    const body = row.querySelector('.body');
    return {
      body: body.textContent,
      recalled: body.classList.contains('recalled'),
      edited: !!row.querySelector('.edited'),
      menu: !!row.querySelector('.msg-menu-btn'),
    };
  }, id);
}

async function waitBubble(page, id, want) {
  await page.waitForFunction(([id, want]) => {
    const row = document.querySelector(`#log .msg[data-id="${id}"]`);
    if (!row) return false;
    const body = row.querySelector('.body');
    return body.textContent === want.body && body.classList.contains('recalled') === want.recalled &&
      !!row.querySelector('.edited') === want.edited;
  }, [id, want]);
}

/* Picks action (Recall, Edit) from the menu of alice's message id. */
async function fromMenu(page, id, action) {
  await page.locator(`#log .msg.mine[data-id="${id}"]`).hover();
  await page.locator(`#log .msg.mine[data-id="${id}"] .msg-menu-btn`).click();
  await page.getByRole('menuitem', { name: action }).click();
}

export async function recallAndEdit(browser, broker, opts) {
  log('5: alice recalls and edits her messages; bob sees the bubbles change');
  const a = await openPage(browser, broker, 'alice', '#' + GROUP);
  const b = await openPage(browser, broker, 'bob', '#' + GROUP);
  for (const p of [a.page, b.page]) {
    await waitOnline(p);
    await p.waitForSelector('#log-top:has-text("No messages yet")');
  }
  const box = a.page.getByRole('textbox', { name: 'Message' });
  for (const text of ['wrong group, sorry', 'see you at 9', 'bring snacks']) {
    await box.fill(text);
    await box.press('Enter');
  }
  for (const p of [a.page, b.page]) await waitCount(p, 3);
  assert.ok((await bubble(a.page, 1)).menu, 'a menu on one\'s own message');
  assert.equal((await bubble(b.page, 1)).menu, false, 'no menu on another member\'s');

  await fromMenu(a.page, 1, 'Recall');
  const gone = { body: 'Message recalled', recalled: true, edited: false };
  await waitBubble(b.page, 1, gone);
  await waitBubble(a.page, 1, gone);
  assert.equal((await bubble(a.page, 1)).menu, false, 'a recalled message has no menu');
  log('5: the recalled bubble changed in place on both pages');

  await fromMenu(a.page, 2, 'Edit');
  assert.equal(await box.inputValue(), 'see you at 9', 'the composer holds the text to edit');
  await a.page.waitForSelector('#composer.editing');
  await box.fill('see you at 10');
  await box.press('Enter');
  const fixed = { body: 'see you at 10', recalled: false, edited: true };
  await waitBubble(b.page, 2, fixed);
  await waitBubble(a.page, 2, fixed);
  assert.equal(await a.page.locator('#composer.editing').count(), 0, 'back to writing');
  /* An edit given up with Escape changes nothing. */
  await fromMenu(a.page, 3, 'Edit');
  await box.press('Escape');
  assert.equal(await box.inputValue(), '');
  /* A picture of both pages' bubbles, the menu open on alice's (for the
   * docs: web-recall.png beside web.png). */
  await a.page.locator('#log .msg.mine[data-id="3"] .msg-menu-btn').click();
  await a.page.screenshot({ path: path.join(opts.shots, 'web-recall.png') });
  await a.page.keyboard.press('Escape');
  log('5: the edited bubble changed in place on both pages');

  /* The messages that carry the changes have no bubble of their own, and
   * nothing else moved. */
  const lb = await shown(b.page);
  assert.deepEqual(lb.map((m) => m.id), [1, 2, 3]);
  assert.deepEqual(lb.map((m) => m.body), ['Message recalled', 'see you at 10', 'bring snacks']);
  assert.deepEqual(await shown(a.page), lb);

  /* Bob comes back: the store holds what his page showed. */
  await b.ctx.close();
  const b2 = await openPage(browser, broker, 'bob', '#' + GROUP);
  await waitOnline(b2.page);
  await waitCount(b2.page, 3);
  await waitBubble(b2.page, 1, gone);
  await waitBubble(b2.page, 2, fixed);
  assert.deepEqual(await shown(b2.page), lb);
  log('5: opened again, bob\'s page shows the store\'s versions');
  await b2.ctx.close();
  await a.ctx.close();
}
