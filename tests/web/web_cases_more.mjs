// web_cases_more.mjs: web_e2e.mjs's cases 3 to 5: the screenshots at two
// sizes (a member of three groups, with receipts and presence), a broker
// with a password_file (refused, then in, as the same device), and a link
// that names another broker (which gets no password).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

import { Broker, log, mqchatOk } from './web_broker.mjs';
import {
  groupLink, openPage, shown, waitCount, waitOnline, waitOnlineList, waitReceipt, waitSettled,
} from './web_page.mjs';

export async function screenshots(browser, broker, opts, a) {
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

export async function password(browser, opts, dir) {
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

/* 5 (issue 21, item 5): a link naming another broker does not get the
 * password. An "attacker" listens on a loopback port and counts every
 * connection; the page, served by the real broker, is opened with
 * ?broker=ws://<attacker>/mqtt: it says so, signs in to the broker that
 * served it, and the attacker sees nothing. Once the operator names that
 * broker in config.json next to the page, the same link goes there. */
export async function brokerLink(browser, opts, dir) {
  log('5: a link that names another broker');
  const pwfile = path.join(dir, 'passwd');
  fs.writeFileSync(pwfile, passwordLine('dana', 'correct horse'));
  /* the page from a copy, so that config.json can be put next to it */
  const web = path.join(dir, 'web');
  fs.cpSync(opts.web, web, { recursive: true });
  const broker = new Broker(dir, { ...opts, web }, ['allow_anonymous false', `password_file ${pwfile}`]);
  const seen = [];
  const attacker = net.createServer((sock) => {
    seen.push(sock.remoteAddress);
    sock.on('data', (d) => seen.push(d.toString('latin1')));
    sock.on('error', () => {});
  });
  await new Promise((resolve) => attacker.listen(0, '127.0.0.1', resolve));
  const evil = `ws://127.0.0.1:${attacker.address().port}/mqtt`;
  await broker.start();
  /* The page's own broker is where it was served from: the broker's
   * websockets listener (http_dir), or nginx's /mqtt in front of it (2.1). */
  const realUrl = `ws://127.0.0.1:${broker.httpPort}/mqtt`;
  try {
    const link = `http://127.0.0.1:${broker.httpPort}/?broker=${encodeURIComponent(evil)}#room5`;
    let { ctx, page } = await openPage(browser, broker, 'dana', '#room5');
    await page.goto(link);
    await page.waitForSelector('#signin:not([hidden])');
    assert.equal(await page.textContent('#signin-broker'), realUrl, 'the form names the real broker');
    assert.match(await page.textContent('#signin-error'), /not set up to use/);
    await page.fill('#signin-name', 'dana');
    await page.fill('#signin-password', 'correct horse');
    await page.press('#signin-password', 'Enter');
    await waitOnline(page);
    await page.getByRole('textbox', { name: 'Message' }).fill('to the real broker');
    await page.keyboard.press('Enter');
    await waitCount(page, 1);
    /* the page sent its CONNECT (with the password) somewhere: not there */
    assert.deepEqual(seen, [], 'the broker a link named was connected to');
    await ctx.close();
    log('5: the page signed in to the broker that served it; the other got nothing');

    /* The operator allows that broker: the link now goes there. */
    fs.writeFileSync(path.join(web, 'config.json'), JSON.stringify({ brokers: [evil] }));
    ({ ctx, page } = await openPage(browser, broker, 'dana', '#room5'));
    await page.goto(link);
    await page.waitForSelector('#signin:not([hidden])');
    assert.equal(await page.textContent('#signin-broker'), evil);
    assert.equal(await page.textContent('#signin-error'), '');
    await page.fill('#signin-name', 'dana');
    await page.fill('#signin-password', 'correct horse');
    await page.press('#signin-password', 'Enter');
    const until = performance.now() + 20_000;
    while (seen.length === 0 && performance.now() < until) await new Promise((r) => setTimeout(r, 50));
    assert.ok(seen.length > 0, 'a broker config.json names was not used');
    await ctx.close();
    await broker.stop();
    log('5: named in config.json, the link\'s broker is used');
  } catch (e) {
    log(broker.tail());
    throw e;
  } finally {
    attacker.close();
    if (broker.proc) broker.proc.kill('SIGKILL');
  }
}
