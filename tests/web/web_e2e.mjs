// web_e2e.mjs: end-to-end tests of the web chat page (clients/web) in a real
// browser: Debian's chromium, headless, driven by playwright-core, against a
// real mosquitto with the real plugin on free loopback ports, with a
// temporary store. Mosquitto 2.0 serves the page itself (http_dir on its
// websockets listener); 2.1's builtin websockets serve no files, so there
// Debian's nginx serves the page and passes /mqtt to the broker, as
// docs/web.md describes (--nginx, /usr/sbin/nginx by default).
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
//      the tab is still the same device (MQTT client id) as at first;
//   5. recall and edit (v1.2) from the menu on one's own bubbles: the other
//      member's page changes the bubbles in place, and shows the same when
//      opened again (run before 4, on the first broker);
//   6. a link that names another broker (?broker=): the form says it will
//      not go there and signs in to the broker that served the page, which
//      gets the password; the other gets no connection, until the
//      operator names it in config.json next to the page.
//
//   node tests/web/web_e2e.mjs --mosquitto /usr/sbin/mosquitto \
//     --plugin build/plugin/mosquitto_chat.so --mqchat build/clients/mqchat \
//     --web clients/web --shots build/web-shots [--chromium /usr/bin/chromium]
//     [--nginx /usr/sbin/nginx]
// (ctest runs it as web_e2e; CHAT_WEB_SHOTS=<dir> overrides --shots.)
//
// This file starts the broker and the browser and runs the cases in order;
// web_broker.mjs runs the broker and mqchat, web_page.mjs opens pages and
// waits on what they show, web_cases_chat.mjs holds cases 1 and 2,
// web_cases_more.mjs cases 3, 4 and 6, web_cases_recall.mjs case 5.
//
// CHAT_BROKER_PRELOAD, when set, becomes the broker's LD_PRELOAD (an
// AddressSanitizer plugin in an uninstrumented broker). Every wait is
// bounded; the whole run is bounded by WATCHDOG_MS.
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Broker, brokerVersion, log } from './web_broker.mjs';
import { catchUp300, twoPeopleChat } from './web_cases_chat.mjs';
import { brokerLink, password, screenshots } from './web_cases_more.mjs';
import { recallAndEdit } from './web_cases_recall.mjs';
import { pageErrors } from './web_page.mjs';

const WATCHDOG_MS = 170_000;

function parseArgs(argv) {
  const o = { chromium: process.env.CHROMIUM || '/usr/bin/chromium', nginx: '/usr/sbin/nginx' };
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
  /* Where the broker serves no http_dir, nginx serves the page. */
  o.serve = brokerVersion(o.mosquitto) >= 20100 ? 'nginx' : 'broker';
  return o;
}


/* ------------------------------------------------------------------------ */

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  for (const f of [opts.mosquitto, opts.plugin, opts.mqchat, opts.chromium,
    ...(opts.serve === 'nginx' ? [opts.nginx] : [])]) {
    if (!fs.existsSync(f)) throw new Error(`${f} is missing (scripts/web-deps --test installs chromium and nginx)`);
  }
  log(`the page is served by ${opts.serve === 'nginx' ? 'nginx in front of the broker' : 'the broker (http_dir)'}`);
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
    await recallAndEdit(browser, broker, opts);
    await broker.stop();
    const pwDir = path.join(dir, 'password');
    fs.mkdirSync(pwDir);
    await password(browser, opts, pwDir);
    const linkDir = path.join(dir, 'link');
    fs.mkdirSync(linkDir);
    await brokerLink(browser, opts, linkDir);
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
