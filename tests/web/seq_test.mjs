// seq_test.mjs: unit tests of the page's ordering module (clients/web/js/seq.js)
// under Node, without a browser: every id shown once and in order, whatever
// order and repetition the ids arrive in; retention gaps; history before the
// shown ids.
//   node tests/web/seq_test.mjs
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const src = fs.readFileSync(path.join(here, '../../clients/web/js/seq.js'), 'utf8');
const sandbox = {};
sandbox.globalThis = sandbox;
vm.runInNewContext(src, sandbox, { filename: 'seq.js' });
const { GroupLog } = sandbox.MqChat;

/* A small deterministic generator, so that a failure can be replayed. */
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const msg = (id) => ({ id, body: 'm' + id });
/* Arrays made inside the vm context have its Array prototype: copy them. */
const ids = (list) => Array.from(list, (m) => m.id);
const range = (a, b) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

const cases = {
  /* v1.2: a recall or an edit replaces a held or shown message in place. */
  update_in_place() {
    const g = new GroupLog(0);
    for (const id of [1, 2, 4]) g.add(msg(id));
    assert.equal(g.update(2, (m) => ({ id: m.id, recalled: true })), 'shown');
    assert.equal(g.find(2).recalled, true);
    assert.equal(g.update(4, (m) => ({ id: m.id, body: 'new' })), 'held');
    assert.equal(g.update(9, () => ({ id: 9 })), null);
    assert.equal(g.update(1, () => null), null, 'a change that does not apply');
    assert.deepEqual(ids(g.add(msg(3))), [3, 4]);
    assert.equal(g.find(4).body, 'new');
    assert.deepEqual(ids(g.msgs), [1, 2, 3, 4]);
  },

  in_order() {
    const g = new GroupLog(0);
    const out = [];
    for (const id of range(1, 50)) out.push(...g.add(msg(id)));
    assert.deepEqual(ids(out), range(1, 50));
    assert.equal(g.hi, 50);
    assert.equal(g.lo, 1);
  },

  duplicates_dropped() {
    const g = new GroupLog(10);
    assert.deepEqual(ids(g.add(msg(11))), [11]);
    assert.deepEqual(ids(g.add(msg(11))), []);
    assert.deepEqual(ids(g.add(msg(10))), [], 'at or below the baseline');
    assert.deepEqual(ids(g.add(msg(13))), []);
    assert.deepEqual(ids(g.add(msg(13))), [], 'held once');
    assert.equal(g.heldCount, 1);
    assert.deepEqual(ids(g.add(msg(12))), [12, 13]);
    assert.equal(g.heldCount, 0);
  },

  shuffled_with_repeats() {
    for (let seed = 1; seed <= 200; seed++) {
      const r = rng(seed);
      const base = Math.floor(r() * 5);
      const n = 1 + Math.floor(r() * 300);
      const feed = [];
      for (const id of range(base + 1, base + n)) {
        feed.push(id);
        if (r() < 0.3) feed.push(id); /* a page and a live copy */
        if (r() < 0.1) feed.push(Math.max(1, id - Math.floor(r() * 5)));
      }
      for (let i = feed.length - 1; i > 0; i--) {
        /* local disorder, as QoS levels and replay interleave */
        const j = Math.max(0, i - Math.floor(r() * 20));
        [feed[i], feed[j]] = [feed[j], feed[i]];
      }
      const g = new GroupLog(base);
      const out = [];
      for (const id of feed) out.push(...g.add(msg(id)));
      assert.deepEqual(ids(out), range(base + 1, base + n), 'seed ' + seed);
      assert.deepEqual(ids(g.msgs), ids(out), 'seed ' + seed);
      assert.equal(g.heldCount, 0, 'seed ' + seed);
    }
  },

  retention_skip() {
    const g = new GroupLog(0);
    assert.deepEqual(ids(g.add(msg(40))), []);
    assert.deepEqual(ids(g.add(msg(41))), []);
    /* a truncated page: retention kept from 38 on */
    assert.deepEqual(ids(g.skipTo(38)), []);
    assert.equal(g.hi, 37);
    assert.deepEqual(ids(g.add(msg(38))), [38]);
    assert.deepEqual(ids(g.add(msg(39))), [39, 40, 41]);
    assert.equal(g.lo, 38);
    assert.deepEqual(ids(g.skipTo(5)), [], 'never backwards');
  },

  skip_releases_held() {
    const g = new GroupLog(0);
    g.add(msg(10));
    g.add(msg(11));
    g.add(msg(3));
    assert.deepEqual(ids(g.skipTo(10)), [10, 11]);
    assert.equal(g.heldCount, 0, 'held ids below the skip are dropped');
  },

  history_before() {
    const g = new GroupLog(100);
    assert.deepEqual(ids(g.add(msg(101))), [101]);
    /* history answers newest first */
    const older = g.addOlder(range(71, 100).reverse().map(msg));
    assert.deepEqual(ids(older), range(71, 100));
    assert.equal(g.lo, 71);
    assert.deepEqual(ids(g.addOlder([msg(80), msg(70), msg(70), msg(69)])), [69, 70]);
    assert.deepEqual(ids(g.msgs), range(69, 101));
    assert.deepEqual(ids(g.add(msg(101))), []);
  },

  history_into_empty() {
    const g = new GroupLog(20);
    assert.deepEqual(ids(g.addOlder(range(1, 20).reverse().map(msg))), range(1, 20));
    assert.equal(g.hi, 20);
    assert.deepEqual(ids(g.add(msg(21))), [21]);
    assert.deepEqual(ids(g.msgs), range(1, 21));
  },

  held_bound() {
    const g = new GroupLog(0, 10);
    for (const id of range(2, 30)) g.add(msg(id));
    assert.equal(g.heldCount, 10);
    /* the first ten ahead of the gap were kept; the rest come again */
    assert.deepEqual(ids(g.add(msg(1))), range(1, 11));
  },
};

let failed = 0;
for (const [name, fn] of Object.entries(cases)) {
  try {
    fn();
    console.log('ok   ' + name);
  } catch (e) {
    failed++;
    console.log('FAIL ' + name + ': ' + (e.stack || e));
  }
}
console.log(failed ? failed + ' of ' + Object.keys(cases).length + ' failed' : 'all passed');
process.exit(failed ? 1 : 0);
