/* proto.js: the mosquitto-chat wire format as the page speaks it (topics,
 * group name rules, request and envelope shapes), as docs/protocol.md
 * defines it. No state, no DOM.
 *
 * The page's scripts are classic scripts sharing one namespace, MqChat, not
 * ES modules: Mosquitto's http_dir sends no Content-Type, and browsers load a
 * module script only with a JavaScript MIME type. */
(function (root) {
  'use strict';
  const MqChat = (root.MqChat = root.MqChat || {});

  const PREFIX = 'chat';
  const CONTROL = '$CONTROL/chat/v1';
  const RESPONSE = '$CONTROL/chat/v1/response';
  const GROUP_MAX_BYTES = 128;
  const CID_MAX_BYTES = 64;

  const utf8 = new TextEncoder();
  const text = new TextDecoder('utf-8', { fatal: false });

  /* The plugin's wording for a bad group name, or null when the name is
   * valid: 1..128 bytes of UTF-8, none of / + # $, no control characters. */
  function groupError(name) {
    if (typeof name !== 'string' || name.length === 0) return 'group name is empty';
    if (utf8.encode(name).length > GROUP_MAX_BYTES) return 'group name is longer than 128 bytes';
    for (const ch of name) {
      const c = ch.codePointAt(0);
      if (c <= 0x1f || (c >= 0x7f && c <= 0x9f)) return 'group name contains a control character';
      if (ch === '/' || ch === '+' || ch === '#' || ch === '$') {
        return 'group name contains one of / + # $';
      }
      if (c >= 0xd800 && c <= 0xdfff) return 'group name is not valid UTF-8';
    }
    return null;
  }

  function groupTopic(group) {
    return PREFIX + '/' + group;
  }

  function ackTopic(group) {
    return PREFIX + '/' + group + '/ack';
  }

  /* v1.1: the member's read marker (it also acks the device). */
  function readTopic(group) {
    return PREFIX + '/' + group + '/read';
  }

  /* The group of a chat/<group> topic, or null for any other topic. */
  function topicGroup(topic) {
    if (!topic.startsWith(PREFIX + '/')) return null;
    const g = topic.slice(PREFIX.length + 1);
    return g.length > 0 && !g.includes('/') ? g : null;
  }

  function decode(payload) {
    return typeof payload === 'string' ? payload : text.decode(payload);
  }

  /* A stored envelope from a payload or an already parsed object, or null
   * when it lacks what every envelope carries (a positive integer id). */
  function envelope(v) {
    let m = v;
    if (typeof v !== 'object' || v === null || v instanceof Uint8Array) {
      try {
        m = JSON.parse(decode(v));
      } catch (e) {
        return null;
      }
    }
    if (typeof m !== 'object' || m === null || !Number.isSafeInteger(m.id) || m.id < 1) {
      return null;
    }
    if (typeof m.from !== 'string') m.from = '';
    if (typeof m.ts !== 'number') m.ts = 0;
    return m;
  }

  /* The fields the plugin writes (v1.2 adds those of recall and edit). */
  const PLUGIN_KEYS = ['id', 'group', 'from', 'ts', 'cid', 'recall', 'edit', 'recalled', 'edited', 'edits'];

  /* v1.2: the change a message carries, {kind: 'recall'|'edit', id}, or
   * null for a message that carries none. */
  function changeOf(m) {
    for (const kind of ['recall', 'edit']) {
      const n = m[kind];
      if (Number.isSafeInteger(n) && n > 0 && n < m.id) return { kind: kind, id: n };
    }
    return null;
  }

  /* The version of n that the change m makes of it (docs/protocol.md,
   * Recall and edit): a recall's tombstone, or an edit's fields in place of
   * n's but id, group, from, ts and cid, with "edited": m's ts and m's id
   * added to "edits". An edit's carrier that a later recall of n rewrote
   * ("recalled": true) applies as that recall. null when it does not
   * apply: nothing applies to a recalled message, an edit only when it is
   * not older than n's own (its "edited", its "edits" naming m or a later
   * message) and comes from n's sender. */
  function applyChange(n, m) {
    const ch = changeOf(m);
    if (!ch || ch.id !== n.id || n.recalled === true) return null;
    const recall = ch.kind === 'recall' || m.recalled === true;
    if (ch.kind === 'edit' && m.from !== n.from) return null;
    const keep = recall ? ['id', 'group', 'from', 'ts'] : ['id', 'group', 'from', 'ts', 'cid'];
    const out = {};
    for (const k of keep) if (k in n) out[k] = n[k];
    if (recall) {
      out.recalled = true;
      return out;
    }
    if (typeof n.edited === 'number' && n.edited > m.ts) return null;
    if (Array.isArray(n.edits) && n.edits.some((e) => e >= m.id)) return null;
    for (const k of Object.keys(m)) if (!PLUGIN_KEYS.includes(k)) out[k] = m[k];
    out.edited = m.ts;
    out.edits = (Array.isArray(n.edits) ? n.edits : []).concat([m.id]);
    return out;
  }

  /* The text to show for a message: its body, or the fields a client put
   * there beside the plugin's own when there is no string body; for what
   * recall and edit (v1.2) made, what a preview says of them. */
  function bodyText(m) {
    if (m.recalled === true) return 'Message recalled';
    const ch = changeOf(m);
    if (ch && ch.kind === 'recall') return 'recalled a message';
    if (typeof m.body === 'string') return m.body;
    const rest = {};
    for (const k of Object.keys(m)) {
      if (!PLUGIN_KEYS.includes(k)) rest[k] = m[k];
    }
    return JSON.stringify(rest);
  }

  function request(commands) {
    return JSON.stringify({ commands: commands });
  }

  /* A message to publish on chat/<group>: the text and a cid, so that a
   * retry after any failure is stored once. */
  function outgoing(body, cid) {
    return JSON.stringify({ body: body, cid: cid });
  }

  function byteLength(s) {
    return utf8.encode(s).length;
  }

  MqChat.proto = {
    PREFIX,
    CONTROL,
    RESPONSE,
    CID_MAX_BYTES,
    groupError,
    groupTopic,
    ackTopic,
    readTopic,
    topicGroup,
    decode,
    envelope,
    changeOf,
    applyChange,
    bodyText,
    request,
    outgoing,
    byteLength,
  };
})(typeof window !== 'undefined' ? window : globalThis);
