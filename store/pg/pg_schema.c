/* pg_schema: the SQL of the PostgreSQL backend (see pg_schema.h and
 * docs/postgresql.md, which describes the tables). */
#include "pg_schema.h"

/* Names, cids and groups are text in the "C" collation, so that ORDER BY
 * is byte order, as LevelDB's keys. Envelopes are bytea: the store keeps
 * bytes, not JSON. Every op that writes more than one row is one function,
 * so that it is one statement, one transaction and one round trip. */
const char *const pg_schema_sql[] = {
    "BEGIN;\n"
    /* Flushed to this server's disk whatever plugin_opt_fsync says: with
     * fsync none the session commits asynchronously, and a database stopped
     * hard right after the first start lost the tables while the broker went
     * on without them (every write then failed with "relation chat_groups
     * does not exist"). local, not on: this runs at every start (CREATE OR
     * REPLACE writes the catalog), and on would wait for a synchronous
     * standby that is down, with no timeout. */
    "SET LOCAL synchronous_commit TO local;\n"
    "SELECT pg_advisory_xact_lock(hashtext('mosquitto-chat schema'));\n"
    "CREATE TABLE IF NOT EXISTS chat_meta (\n"
    "  name text COLLATE \"C\" PRIMARY KEY,\n"
    "  value text NOT NULL);\n"
    "INSERT INTO chat_meta VALUES ('schema', '" PG_SCHEMA_VERSION "'),\n"
    "  ('incarnation', md5(random()::text || clock_timestamp()::text))\n"
    "  ON CONFLICT (name) DO NOTHING;\n"
    /* One row per group that has had a message (or a deletion): the
     * counter row whose lock orders the group's appends. */
    "CREATE TABLE IF NOT EXISTS chat_groups (\n"
    "  grp text COLLATE \"C\" PRIMARY KEY,\n"
    "  head bigint NOT NULL DEFAULT 0,\n"
    "  first bigint NOT NULL DEFAULT 1,\n"
    "  last_ts bigint NOT NULL DEFAULT 0,\n"
    "  del_gen bigint,\n"
    "  del_bound bigint);\n"
    "CREATE INDEX IF NOT EXISTS chat_groups_order ON chat_groups (octet_length(grp), grp);\n"
    "CREATE TABLE IF NOT EXISTS chat_messages (\n"
    "  grp text COLLATE \"C\" NOT NULL,\n"
    "  id bigint NOT NULL,\n"
    "  sender text COLLATE \"C\" NOT NULL,\n"
    "  cid text COLLATE \"C\",\n"
    "  origin bigint NOT NULL,\n"
    "  env bytea NOT NULL,\n"
    "  PRIMARY KEY (grp, id));\n"
    "CREATE UNIQUE INDEX IF NOT EXISTS chat_messages_cid ON chat_messages (grp, sender, cid);\n"
    "CREATE TABLE IF NOT EXISTS chat_members (\n"
    "  grp text COLLATE \"C\" NOT NULL,\n"
    "  member text COLLATE \"C\" NOT NULL,\n"
    "  joined bigint NOT NULL,\n"
    "  gen bigint NOT NULL DEFAULT 0,\n"
    "  PRIMARY KEY (grp, member));\n"
    "CREATE INDEX IF NOT EXISTS chat_members_by_member ON chat_members (member, grp);\n"
    /* The member's read marker (protocol v1.1) lives with its membership:
     * leaving, or a group deletion's removal of the membership, takes it
     * along. Added to databases made before it; older brokers' positional
     * inserts leave it at its default. */
    "ALTER TABLE chat_members ADD COLUMN IF NOT EXISTS read_id bigint NOT NULL DEFAULT 0;\n"
    /* a group's members in the order of the LevelDB backend's keys, which
     * the listings page by (chat_store_group_members) */
    "CREATE INDEX IF NOT EXISTS chat_members_order ON chat_members\n"
    "  (grp, octet_length(member), member);\n"
    "CREATE TABLE IF NOT EXISTS chat_cursors (\n"
    "  grp text COLLATE \"C\" NOT NULL,\n"
    "  member text COLLATE \"C\" NOT NULL,\n"
    "  device text COLLATE \"C\" NOT NULL,\n"
    "  acked bigint NOT NULL,\n"
    "  used bigint NOT NULL,\n"
    "  PRIMARY KEY (grp, member, device));\n"
    "CREATE TABLE IF NOT EXISTS chat_cursor_max (\n"
    "  grp text COLLATE \"C\" NOT NULL,\n"
    "  member text COLLATE \"C\" NOT NULL,\n"
    "  acked bigint NOT NULL,\n"
    "  PRIMARY KEY (grp, member));\n"
    "CREATE SEQUENCE IF NOT EXISTS chat_deletions;\n"
    /* Push registrations (protocol v1.2), one per device of a member; they
     * go with the member's last membership (chat_member_remove,
     * chat_group_delete). */
    "CREATE TABLE IF NOT EXISTS chat_push (\n"
    "  member text COLLATE \"C\" NOT NULL,\n"
    "  device text COLLATE \"C\" NOT NULL,\n"
    "  reg bytea NOT NULL,\n"
    "  created bigint NOT NULL,\n"
    "  PRIMARY KEY (member, device));\n",

    /* Whether m has a membership that counts in a group other than g
     * (NULL: any): what keeps a member's push registrations. */
    "CREATE OR REPLACE FUNCTION chat_member_elsewhere(m text, g text) RETURNS boolean\n"
    "LANGUAGE sql STABLE AS $$\n"
    "  SELECT EXISTS (SELECT 1 FROM chat_members mm LEFT JOIN chat_groups gg\n"
    "    ON gg.grp = mm.grp WHERE mm.member = m AND (g IS NULL OR mm.grp <> g)\n"
    "    AND (gg.del_gen IS NULL OR mm.gen = gg.del_gen)) $$;\n",

    /* The member's push lock (an advisory lock per member name): a
     * registration's put takes it before it looks for a membership, and
     * whatever ends memberships (chat_member_remove, chat_group_delete,
     * chat_expire_devices) takes it before it ends them, so one of the two
     * waits for the other's commit and sees it: a put never stores a
     * registration that the end of the last membership has already swept,
     * and two ends of a member's last two memberships do not each see the
     * other still there. Taken before any row lock of the member's. */
    "CREATE OR REPLACE FUNCTION chat_push_lock(m text) RETURNS void\n"
    "LANGUAGE sql AS $$\n"
    "  SELECT pg_advisory_xact_lock(hashtext('mosquitto-chat push ' || m)) $$;\n",

    /* A device's registration, in place of its own: 0 stored, 1 the
     * member's other devices hold maxn already, 2 a member of no group.
     * The push lock orders two brokers' puts of one member, so that the
     * count holds, and orders the put against the end of a membership (the
     * look for one comes after the lock: 0.2.0 looked first). */
    "CREATE OR REPLACE FUNCTION chat_push_put(m text, d text, r bytea, t bigint, maxn bigint)\n"
    "RETURNS integer LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "  PERFORM chat_push_lock(m);\n"
    "  IF NOT chat_member_elsewhere(m, NULL) THEN RETURN 2; END IF;\n"
    "  IF (SELECT count(*) FROM chat_push WHERE member = m AND device <> d) >= maxn THEN\n"
    "    RETURN 1;\n"
    "  END IF;\n"
    "  INSERT INTO chat_push VALUES (m, d, r, t) ON CONFLICT (member, device)\n"
    "    DO UPDATE SET reg = excluded.reg, created = excluded.created;\n"
    "  RETURN 0;\n"
    "END $$;\n",

    /* Registrations made before `older` whose device has no cursor left, in
     * bounded steps in key order from (rm, rd). */
    "CREATE OR REPLACE FUNCTION chat_push_expire(older bigint, maxk bigint, rm text, rd text,\n"
    "    OUT removed bigint, OUT done boolean, OUT lm text, OUT ld text)\n"
    "LANGUAGE plpgsql AS $$\n"
    "DECLARE r record; n bigint := 0;\n"
    "BEGIN\n"
    "  removed := 0;\n"
    "  FOR r IN SELECT member, device, created FROM chat_push\n"
    "      WHERE rm IS NULL OR (member, device) > (rm, rd)\n"
    "      ORDER BY member, device LIMIT maxk LOOP\n"
    "    n := n + 1;\n"
    "    IF r.created < older AND NOT EXISTS (SELECT 1 FROM chat_members mm\n"
    "        JOIN chat_cursors cc ON cc.grp = mm.grp AND cc.member = mm.member\n"
    "        AND cc.device = r.device WHERE mm.member = r.member) THEN\n"
    "      DELETE FROM chat_push WHERE member = r.member AND device = r.device;\n"
    "      removed := removed + 1;\n"
    "    END IF;\n"
    "    lm := r.member; ld := r.device;\n"
    "  END LOOP;\n"
    "  done := n < maxk;\n"
    "END $$;\n",

    /* The joined id of a membership that counts (NULL: none): while the
     * group is being deleted, only memberships added since. */
    "CREATE OR REPLACE FUNCTION chat_member_joined(g text, m text) RETURNS bigint\n"
    "LANGUAGE sql STABLE AS $$\n"
    "  SELECT mm.joined FROM chat_members mm LEFT JOIN chat_groups gg ON gg.grp = mm.grp\n"
    "  WHERE mm.grp = g AND mm.member = m AND (gg.del_gen IS NULL OR mm.gen = gg.del_gen) $$;\n",

    /* One publish: the counter row's lock orders the group, the cid's
     * unique index finds a retry (sent to any broker), NOTIFY fires at
     * commit. A duplicate rolls its counter back by hand, under the same
     * lock, so that no id is used up. With rd, a new message moves its
     * sender's read marker to its id (a membership that counts: see
     * chat_member_joined); rdm says whether it did. (Brokers of an older
     * version call the overload without rd, which stays.) */
    "CREATE OR REPLACE FUNCTION chat_append(g text, s text, c text, o bigint,\n"
    "    h bytea, m bytea, t bytea, rd boolean, OUT nid bigint, OUT nts bigint,\n"
    "    OUT dup boolean, OUT env bytea, OUT rdm boolean) LANGUAGE plpgsql AS $$\n"
    "DECLARE now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);\n"
    "  f bigint;\n"
    "BEGIN\n"
    "  dup := false;\n"
    "  rdm := false;\n"
    "  IF c IS NOT NULL THEN\n"
    "    SELECT mm.id, mm.env INTO nid, env FROM chat_messages mm JOIN chat_groups gg\n"
    "      ON gg.grp = mm.grp WHERE mm.grp = g AND mm.sender = s AND mm.cid = c\n"
    "      AND mm.id >= gg.first;\n"
    "    IF FOUND THEN dup := true; nts := 0; RETURN; END IF;\n"
    "  END IF;\n"
    "  UPDATE chat_groups SET head = head + 1, last_ts = greatest(last_ts, now_ms)\n"
    "    WHERE grp = g RETURNING head, last_ts, first INTO nid, nts, f;\n"
    "  IF NOT FOUND THEN\n"
    "    INSERT INTO chat_groups AS gg (grp, head, last_ts) VALUES (g, 1, now_ms)\n"
    "      ON CONFLICT (grp) DO UPDATE SET head = gg.head + 1,\n"
    "      last_ts = greatest(gg.last_ts, now_ms) RETURNING head, last_ts, first\n"
    "      INTO nid, nts, f;\n"
    "  END IF;\n"
    "  env := h || convert_to(nid::text, 'UTF8') || m || convert_to(nts::text, 'UTF8') || t;\n"
    "  INSERT INTO chat_messages VALUES (g, nid, s, c, o, env)\n"
    "    ON CONFLICT (grp, sender, cid) DO NOTHING;\n"
    "  IF NOT FOUND THEN\n"
    "    SELECT mm.id, mm.env INTO STRICT f, env FROM chat_messages mm\n"
    "      WHERE mm.grp = g AND mm.sender = s AND mm.cid = c;\n"
    "    IF f >= (SELECT first FROM chat_groups WHERE grp = g) THEN\n"
    "      UPDATE chat_groups SET head = head - 1 WHERE grp = g;\n"
    "      nid := f; nts := 0; dup := true; RETURN;\n"
    "    END IF;\n"
    "    DELETE FROM chat_messages WHERE grp = g AND sender = s AND cid = c;\n"
    "    env := h || convert_to(nid::text, 'UTF8') || m || convert_to(nts::text, 'UTF8') || t;\n"
    "    INSERT INTO chat_messages VALUES (g, nid, s, c, o, env);\n"
    "  END IF;\n"
    "  env := NULL;\n"
    "  IF rd THEN\n"
    "    UPDATE chat_members mm SET read_id = nid FROM chat_groups gg\n"
    "      WHERE mm.grp = g AND mm.member = s AND gg.grp = g AND mm.read_id < nid\n"
    "      AND (gg.del_gen IS NULL OR mm.gen = gg.del_gen);\n"
    "    rdm := FOUND;\n"
    "  END IF;\n"
    "  PERFORM pg_notify('" PG_CHANNEL_MSG "', o::text || '/' || nid::text || '/' || g);\n"
    "END $$;\n",

    /* A change of message n (protocol v1.2, recall and edit): under the
     * group's row lock, as every append, trim and deletion of the group
     * takes it, n is compared with the version the caller decided on (x),
     * rewritten in place (its sender and cid stay: the cid stays taken)
     * and the message carrying the change stored under head + 1, all in
     * this one transaction (change-atomic). With rd, that message moves
     * its sender's read marker, as chat_append's rd (it is the sender's
     * own); rdm says whether it did. ok false: n is gone (below first) or
     * was changed meanwhile, and nothing is written. (Brokers of 0.2.0
     * call the overload without rd and create it at their start: it
     * stays. Replacing it instead would change its result, which
     * PostgreSQL allows only by a DROP, and such a broker restarted beside
     * this one would then not start.) */
    "CREATE OR REPLACE FUNCTION chat_change(g text, s text, n bigint, x bytea, vh bytea,\n"
    "    st boolean, vt bytea, o bigint, h bytea, m bytea, t bytea, rd boolean,\n"
    "    OUT nid bigint, OUT nts bigint, OUT ok boolean, OUT rdm boolean)\n"
    "LANGUAGE plpgsql AS $$\n"
    "DECLARE now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);\n"
    "  f bigint; cur bytea;\n"
    "BEGIN\n"
    "  ok := false; nid := 0; nts := 0; rdm := false;\n"
    "  SELECT first INTO f FROM chat_groups WHERE grp = g FOR UPDATE;\n"
    "  IF NOT FOUND OR n < f THEN RETURN; END IF;\n"
    "  SELECT mm.env INTO cur FROM chat_messages mm WHERE mm.grp = g AND mm.id = n;\n"
    "  IF NOT FOUND OR cur <> x THEN RETURN; END IF;\n"
    "  UPDATE chat_groups SET head = head + 1, last_ts = greatest(last_ts, now_ms)\n"
    "    WHERE grp = g RETURNING head, last_ts INTO nid, nts;\n"
    "  UPDATE chat_messages SET env = CASE WHEN st THEN vh || convert_to(nts::text, 'UTF8')\n"
    "    || vt ELSE vh END WHERE grp = g AND id = n;\n"
    "  INSERT INTO chat_messages VALUES (g, nid, s, NULL, o, h || convert_to(nid::text, 'UTF8')\n"
    "    || m || convert_to(nts::text, 'UTF8') || t);\n"
    "  IF rd THEN\n"
    "    UPDATE chat_members mm SET read_id = nid FROM chat_groups gg\n"
    "      WHERE mm.grp = g AND mm.member = s AND gg.grp = g AND mm.read_id < nid\n"
    "      AND (gg.del_gen IS NULL OR mm.gen = gg.del_gen);\n"
    "    rdm := FOUND;\n"
    "  END IF;\n"
    "  ok := true;\n"
    "  PERFORM pg_notify('" PG_CHANNEL_MSG "', o::text || '/' || nid::text || '/' || g);\n"
    "END $$;\n",

    /* The same change, as brokers since recall-complete call it: with si,
     * N's new version also gets M's id and vl after vt (an edit's list of
     * the messages that carried N's edits), and the messages ri (above n)
     * are rewritten to rn in this transaction, each only while it holds rx
     * (a recall's earlier edit carriers, which hold N's edited texts):
     * when one does not, nothing is written. Every check comes before the
     * first write. (A new overload beside the one of 0.2.x brokers, which
     * they keep calling.) */
    "CREATE OR REPLACE FUNCTION chat_change(g text, s text, n bigint, x bytea, vh bytea,\n"
    "    st boolean, vt bytea, si boolean, vl bytea, o bigint, h bytea, m bytea, t bytea,\n"
    "    rd boolean, ri bigint[], rx bytea[], rn bytea[],\n"
    "    OUT nid bigint, OUT nts bigint, OUT ok boolean, OUT rdm boolean)\n"
    "LANGUAGE plpgsql AS $$\n"
    "DECLARE now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);\n"
    "  f bigint; cur bytea; k integer := coalesce(array_length(ri, 1), 0);\n"
    "BEGIN\n"
    "  ok := false; nid := 0; nts := 0; rdm := false;\n"
    "  IF k <> coalesce(array_length(rx, 1), 0) OR k <> coalesce(array_length(rn, 1), 0) THEN\n"
    "    RAISE EXCEPTION 'chat_change: % rewrites, % expected, % new texts', k,\n"
    "      array_length(rx, 1), array_length(rn, 1) USING ERRCODE = '22023';\n"
    "  END IF;\n"
    "  SELECT first INTO f FROM chat_groups WHERE grp = g FOR UPDATE;\n"
    "  IF NOT FOUND OR n < f THEN RETURN; END IF;\n"
    "  SELECT mm.env INTO cur FROM chat_messages mm WHERE mm.grp = g AND mm.id = n;\n"
    "  IF NOT FOUND OR cur <> x THEN RETURN; END IF;\n"
    "  FOR i IN 1 .. k LOOP\n"
    "    SELECT mm.env INTO cur FROM chat_messages mm WHERE mm.grp = g AND mm.id = ri[i];\n"
    "    IF NOT FOUND OR ri[i] <= n OR cur <> rx[i] THEN RETURN; END IF;\n"
    "  END LOOP;\n"
    "  UPDATE chat_groups SET head = head + 1, last_ts = greatest(last_ts, now_ms)\n"
    "    WHERE grp = g RETURNING head, last_ts INTO nid, nts;\n"
    "  UPDATE chat_messages SET env = CASE WHEN st THEN vh || convert_to(nts::text, 'UTF8')\n"
    "    || vt || CASE WHEN si THEN convert_to(nid::text, 'UTF8') || vl ELSE ''::bytea END\n"
    "    ELSE vh END WHERE grp = g AND id = n;\n"
    "  FOR i IN 1 .. k LOOP\n"
    "    UPDATE chat_messages SET env = rn[i] WHERE grp = g AND id = ri[i];\n"
    "  END LOOP;\n"
    "  INSERT INTO chat_messages VALUES (g, nid, s, NULL, o, h || convert_to(nid::text, 'UTF8')\n"
    "    || m || convert_to(nts::text, 'UTF8') || t);\n"
    "  IF rd THEN\n"
    "    UPDATE chat_members mm SET read_id = nid FROM chat_groups gg\n"
    "      WHERE mm.grp = g AND mm.member = s AND gg.grp = g AND mm.read_id < nid\n"
    "      AND (gg.del_gen IS NULL OR mm.gen = gg.del_gen);\n"
    "    rdm := FOUND;\n"
    "  END IF;\n"
    "  ok := true;\n"
    "  PERFORM pg_notify('" PG_CHANNEL_MSG "', o::text || '/' || nid::text || '/' || g);\n"
    "END $$;\n",

    "CREATE OR REPLACE FUNCTION chat_trim(g text, b bigint, maxk bigint) RETURNS bigint\n"
    "LANGUAGE plpgsql AS $$\n"
    "DECLARE h bigint; f bigint; stop bigint;\n"
    "BEGIN\n"
    "  SELECT head, first INTO h, f FROM chat_groups WHERE grp = g FOR UPDATE;\n"
    "  IF NOT FOUND THEN RETURN 1; END IF;\n"
    "  b := least(b, h + 1);\n"
    "  IF b <= f THEN RETURN f; END IF;\n"
    "  stop := CASE WHEN b - f > maxk THEN f + maxk ELSE b END;\n"
    "  DELETE FROM chat_messages WHERE grp = g AND id >= f AND id < stop;\n"
    "  UPDATE chat_groups SET first = stop WHERE grp = g;\n"
    "  RETURN stop;\n"
    "END $$;\n",

    /* A device's ack: the cursor moves forward only, clamped to head, its
     * last use stamped at most once a day; the member's maximum follows. */
    "CREATE OR REPLACE FUNCTION chat_cursor_advance(g text, m text, d text, a bigint,\n"
    "    now_ms bigint) RETURNS bigint LANGUAGE plpgsql AS $$\n"
    "DECLARE h bigint; cur bigint;\n"
    "BEGIN\n"
    "  SELECT head INTO h FROM chat_groups WHERE grp = g;\n"
    "  a := least(a, coalesce(h, 0));\n"
    "  INSERT INTO chat_cursors AS cc VALUES (g, m, d, a, now_ms)\n"
    "    ON CONFLICT (grp, member, device) DO UPDATE\n"
    "    SET acked = greatest(cc.acked, excluded.acked), used = excluded.used\n"
    "    WHERE excluded.acked > cc.acked OR excluded.used / 86400000 <> cc.used / 86400000\n"
    "    RETURNING acked INTO cur;\n"
    "  IF NOT FOUND THEN\n"
    "    SELECT acked INTO cur FROM chat_cursors WHERE grp = g AND member = m AND device = d;\n"
    "  END IF;\n"
    "  INSERT INTO chat_cursor_max AS x VALUES (g, m, cur) ON CONFLICT (grp, member)\n"
    "    DO UPDATE SET acked = excluded.acked WHERE x.acked < excluded.acked;\n"
    "  RETURN cur;\n"
    "END $$;\n",

    /* Where a device starts: its cursor, else the most advanced of its
     * member's devices, else where the member joined; created there. */
    "CREATE OR REPLACE FUNCTION chat_cursor_start(g text, m text, d text, now_ms bigint,\n"
    "    OUT cur bigint, OUT ok boolean) LANGUAGE plpgsql AS $$\n"
    "DECLARE j bigint; best bigint;\n"
    "BEGIN\n"
    "  SELECT acked INTO cur FROM chat_cursors WHERE grp = g AND member = m AND device = d;\n"
    "  IF FOUND THEN\n"
    "    ok := true;\n"
    "    UPDATE chat_cursors SET used = now_ms WHERE grp = g AND member = m AND device = d\n"
    "      AND used / 86400000 <> now_ms / 86400000;\n"
    "    RETURN;\n"
    "  END IF;\n"
    /* the membership row's lock orders this against device expiry taking
     * the member's last cursor and the member (chat_expire_devices) */
    "  PERFORM 1 FROM chat_members WHERE grp = g AND member = m FOR SHARE;\n"
    "  j := chat_member_joined(g, m);\n"
    "  IF j IS NULL THEN ok := false; cur := 0; RETURN; END IF;\n"
    "  SELECT acked INTO best FROM chat_cursor_max WHERE grp = g AND member = m;\n"
    "  cur := greatest(j, coalesce(best, 0));\n"
    "  INSERT INTO chat_cursors VALUES (g, m, d, cur, now_ms)\n"
    "    ON CONFLICT (grp, member, device) DO NOTHING;\n"
    "  INSERT INTO chat_cursor_max AS x VALUES (g, m, cur) ON CONFLICT (grp, member)\n"
    "    DO UPDATE SET acked = excluded.acked WHERE x.acked < excluded.acked;\n"
    "  ok := true;\n"
    "END $$;\n",

    /* Device expiry in bounded steps, in key order from (rg, rm, rd); with
     * dm (drop members), a member whose last cursor goes goes with it, in
     * this transaction. Its membership row is locked before the look for
     * other cursors: chat_cursor_start, making a device's first cursor on
     * another broker, locks it too, so one of the two waits for the other
     * and sees what it did. (chat_expire, the function older brokers
     * call, had no dm: a database keeps it for them.) */
    "CREATE OR REPLACE FUNCTION chat_expire_devices(older bigint, maxk bigint, dm boolean,\n"
    "    rg text, rm text, rd text, OUT removed bigint, OUT members bigint, OUT done boolean,\n"
    "    OUT lg text, OUT lm text, OUT ld text) LANGUAGE plpgsql AS $$\n"
    "DECLARE r record; n bigint := 0; k bigint;\n"
    "BEGIN\n"
    "  removed := 0; members := 0;\n"
    "  FOR r IN SELECT grp, member, device, used FROM chat_cursors\n"
    "      WHERE rg IS NULL OR (grp, member, device) > (rg, rm, rd)\n"
    "      ORDER BY grp, member, device LIMIT maxk LOOP\n"
    "    n := n + 1;\n"
    "    lg := r.grp; lm := r.member; ld := r.device;\n"
    "    CONTINUE WHEN r.used >= older;\n"
    /* the membership row before the cursor, as chat_read_advance locks
     * them: the other order could deadlock with a read */
    "    IF dm THEN\n"
    "      PERFORM chat_push_lock(r.member);\n"
    "      PERFORM 1 FROM chat_members WHERE grp = r.grp AND member = r.member FOR UPDATE;\n"
    "    END IF;\n"
    /* a use stamped meanwhile by another broker keeps the cursor */
    "    DELETE FROM chat_cursors WHERE grp = r.grp AND member = r.member\n"
    "      AND device = r.device AND used < older;\n"
    "    GET DIAGNOSTICS k = ROW_COUNT;\n"
    "    removed := removed + k;\n"
    "    CONTINUE WHEN k = 0 OR NOT dm;\n"
    "    CONTINUE WHEN EXISTS (SELECT 1 FROM chat_cursors WHERE grp = r.grp\n"
    "      AND member = r.member);\n"
    /* only a membership that counts: one a deletion under way has done
     * away with is that deletion's to remove */
    "    IF chat_member_joined(r.grp, r.member) IS NOT NULL THEN\n"
    "      DELETE FROM chat_members WHERE grp = r.grp AND member = r.member;\n"
    "      members := members + 1;\n"
    /* its last group: its push registrations go too (push-with-member) */
    "      IF NOT chat_member_elsewhere(r.member, r.grp) THEN\n"
    "        DELETE FROM chat_push WHERE member = r.member;\n"
    "      END IF;\n"
    "      PERFORM pg_notify('" PG_CHANNEL_INVAL "', r.grp);\n"
    "      DELETE FROM chat_cursor_max WHERE grp = r.grp AND member = r.member;\n"
    "    ELSIF NOT EXISTS (SELECT 1 FROM chat_members WHERE grp = r.grp\n"
    "        AND member = r.member) THEN\n"
    "      DELETE FROM chat_cursor_max WHERE grp = r.grp AND member = r.member;\n"
    "    END IF;\n"
    "  END LOOP;\n"
    "  done := n < maxk;\n"
    "END $$;\n",

    "CREATE OR REPLACE FUNCTION chat_member_add(g text, m text) RETURNS bigint\n"
    "LANGUAGE plpgsql AS $$\n"
    "DECLARE j bigint; h bigint; dg bigint;\n"
    "BEGIN\n"
    "  j := chat_member_joined(g, m);\n"
    "  IF j IS NOT NULL THEN RETURN j; END IF;\n"
    "  SELECT head, del_gen INTO h, dg FROM chat_groups WHERE grp = g;\n"
    "  IF dg IS NOT NULL THEN\n"
    /* joining a group being deleted: a new membership, without the cursors
     * of the old one */
    "    DELETE FROM chat_cursors WHERE grp = g AND member = m;\n"
    "    DELETE FROM chat_cursor_max WHERE grp = g AND member = m;\n"
    "  END IF;\n"
    "  INSERT INTO chat_members AS mm (grp, member, joined, gen)\n"
    "    VALUES (g, m, coalesce(h, 0), coalesce(dg, 0))\n"
    "    ON CONFLICT (grp, member) DO UPDATE SET joined = excluded.joined, gen = excluded.gen,\n"
    "    read_id = 0\n"
    "    WHERE dg IS NOT NULL AND mm.gen <> dg RETURNING joined INTO j;\n"
    "  IF NOT FOUND THEN RETURN chat_member_joined(g, m); END IF;\n"
    "  PERFORM pg_notify('" PG_CHANNEL_INVAL "', g);\n"
    "  RETURN j;\n"
    "END $$;\n",

    /* A join and its device's cursor (chat_store_member_join): what
     * chat_member_add does, then, for a device d (not NULL),
     * chat_cursor_start, in this one transaction: both or neither, one
     * commit for a new member's first subscribe instead of two. It calls
     * the two rather than repeat their bodies, so it does what they do
     * (as whichever broker created them last wrote them) and takes their
     * locks in their order: the membership row before a cursor row, as
     * chat_expire_devices takes them. ok false: no cursor was made (no
     * device, or a deletion of the group that committed between the two
     * made the membership stop counting; that deletion removes it). A
     * function new beside the others: brokers before it never call it. */
    "CREATE OR REPLACE FUNCTION chat_member_join(g text, m text, d text, now_ms bigint,\n"
    "    OUT j bigint, OUT cur bigint, OUT ok boolean) LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "  j := chat_member_add(g, m);\n"
    "  cur := 0; ok := false;\n"
    "  IF d IS NOT NULL THEN\n"
    "    SELECT * INTO cur, ok FROM chat_cursor_start(g, m, d, now_ms);\n"
    "  END IF;\n"
    "END $$;\n",

    /* A read (protocol v1.1): a member's marker moves forward only, clamped
     * to head, and the reading device's cursor moves with it as
     * chat_cursor_advance moves it, in one transaction, so that no marker
     * is ever ahead of the ack it implies. The membership row's lock orders
     * two brokers' reads of one member. Nothing is written for a
     * non-member (found false). */
    "CREATE OR REPLACE FUNCTION chat_read_advance(g text, m text, d text, a bigint,\n"
    "    now_ms bigint, OUT rd bigint, OUT cur bigint, OUT moved boolean,\n"
    "    OUT ok boolean) LANGUAGE plpgsql AS $$\n"
    "DECLARE h bigint;\n"
    "BEGIN\n"
    "  moved := false; cur := 0;\n"
    "  SELECT mm.read_id INTO rd FROM chat_members mm LEFT JOIN chat_groups gg\n"
    "    ON gg.grp = mm.grp WHERE mm.grp = g AND mm.member = m\n"
    "    AND (gg.del_gen IS NULL OR mm.gen = gg.del_gen) FOR UPDATE OF mm;\n"
    "  ok := FOUND;\n"
    "  IF NOT ok THEN rd := 0; RETURN; END IF;\n"
    "  SELECT head INTO h FROM chat_groups WHERE grp = g;\n"
    "  a := least(a, coalesce(h, 0));\n"
    "  cur := chat_cursor_advance(g, m, d, a, now_ms);\n"
    "  IF a > rd THEN\n"
    "    UPDATE chat_members SET read_id = a WHERE grp = g AND member = m;\n"
    "    rd := a; moved := true;\n"
    "  END IF;\n"
    "END $$;\n",

    "CREATE OR REPLACE FUNCTION chat_member_remove(g text, m text) RETURNS void\n"
    "LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "  PERFORM chat_push_lock(m);\n"
    "  DELETE FROM chat_members WHERE grp = g AND member = m;\n"
    "  DELETE FROM chat_cursors WHERE grp = g AND member = m;\n"
    "  DELETE FROM chat_cursor_max WHERE grp = g AND member = m;\n"
    "  IF NOT chat_member_elsewhere(m, g) THEN\n"
    "    DELETE FROM chat_push WHERE member = m;\n"
    "  END IF;\n"
    "  PERFORM pg_notify('" PG_CHANNEL_INVAL "', g);\n"
    "END $$;\n",

    /* A group's deletion in steps of at most maxk rows: the first step
     * makes it read as empty (first = head + 1, older memberships stop
     * counting); later publishes and joins are not touched. */
    "CREATE OR REPLACE FUNCTION chat_group_delete(g text, maxk bigint) RETURNS boolean\n"
    "LANGUAGE plpgsql AS $$\n"
    "DECLARE h bigint; dg bigint; b bigint; n bigint; left_ bigint := maxk; ms text[];\n"
    "  m text;\n"
    "BEGIN\n"
    "  INSERT INTO chat_groups (grp) VALUES (g) ON CONFLICT (grp) DO NOTHING;\n"
    "  SELECT head, del_gen, del_bound INTO h, dg, b FROM chat_groups WHERE grp = g\n"
    "    FOR UPDATE;\n"
    "  IF dg IS NULL THEN\n"
    "    dg := nextval('chat_deletions');\n"
    "    b := h + 1;\n"
    "    UPDATE chat_groups SET del_gen = dg, del_bound = b,\n"
    "      first = CASE WHEN h > 0 THEN b ELSE first END WHERE grp = g;\n"
    "    PERFORM pg_notify('" PG_CHANNEL_INVAL "', g);\n"
    "  END IF;\n"
    "  DELETE FROM chat_messages WHERE ctid IN (SELECT ctid FROM chat_messages\n"
    "    WHERE grp = g AND id < b LIMIT left_);\n"
    "  GET DIAGNOSTICS n = ROW_COUNT; left_ := left_ - n;\n"
    "  IF left_ > 0 THEN\n"
    "    DELETE FROM chat_cursors WHERE ctid IN (SELECT cc.ctid FROM chat_cursors cc\n"
    "      WHERE cc.grp = g AND NOT EXISTS (SELECT 1 FROM chat_members mm WHERE mm.grp = g\n"
    "      AND mm.member = cc.member AND mm.gen = dg) LIMIT left_);\n"
    "    GET DIAGNOSTICS n = ROW_COUNT; left_ := left_ - n;\n"
    "  END IF;\n"
    "  IF left_ > 0 THEN\n"
    "    DELETE FROM chat_cursor_max WHERE ctid IN (SELECT x.ctid FROM chat_cursor_max x\n"
    "      WHERE x.grp = g AND NOT EXISTS (SELECT 1 FROM chat_members mm WHERE mm.grp = g\n"
    "      AND mm.member = x.member AND mm.gen = dg) LIMIT left_);\n"
    "    GET DIAGNOSTICS n = ROW_COUNT; left_ := left_ - n;\n"
    "  END IF;\n"
    "  IF left_ > 0 THEN\n"
    /* the members whose last group this was lose their push
     * registrations with the membership (the data-modifying CTE and the
     * outer delete read one snapshot, so g is left out by name); their
     * push locks first, in name order, so that two deletions sharing
     * members take them in one order */
    "    SELECT array_agg(member ORDER BY member) INTO ms FROM (SELECT member\n"
    "      FROM chat_members WHERE grp = g AND gen <> dg ORDER BY member LIMIT left_) x;\n"
    "    FOREACH m IN ARRAY coalesce(ms, '{}') LOOP PERFORM chat_push_lock(m); END LOOP;\n"
    "    WITH gone AS (DELETE FROM chat_members WHERE grp = g AND gen <> dg\n"
    "      AND member = ANY (ms) RETURNING member),\n"
    "    orphans AS (DELETE FROM chat_push p USING gone WHERE p.member = gone.member\n"
    "      AND NOT chat_member_elsewhere(gone.member, g))\n"
    "    SELECT count(*) INTO n FROM gone;\n"
    "    left_ := left_ - n;\n"
    "  END IF;\n"
    "  IF left_ > 0 THEN\n"
    "    UPDATE chat_groups SET del_gen = NULL, del_bound = NULL WHERE grp = g;\n"
    "    RETURN true;\n"
    "  END IF;\n"
    "  RETURN false;\n"
    "END $$;\n",

    /* For an import: a group that has no head yet continues after h. The
     * row lock (or the insert's conflict) keeps a publish from slipping
     * in between the look and the write. */
    "CREATE OR REPLACE FUNCTION chat_group_init(g text, h bigint) RETURNS boolean\n"
    "LANGUAGE plpgsql AS $$\n"
    "DECLARE cur bigint;\n"
    "BEGIN\n"
    "  SELECT head INTO cur FROM chat_groups WHERE grp = g FOR UPDATE;\n"
    "  IF coalesce(cur, 0) <> 0 THEN RETURN false; END IF;\n"
    "  IF h = 0 THEN RETURN true; END IF;\n"
    "  INSERT INTO chat_groups AS gg (grp, head, first) VALUES (g, h, h + 1)\n"
    "    ON CONFLICT (grp) DO UPDATE SET head = excluded.head, first = excluded.first\n"
    "    WHERE gg.head = 0;\n"
    "  RETURN FOUND;\n"
    "END $$;\n",

    /* The check of chat_store_check, over the whole database. STABLE: every
     * query in it reads the one snapshot of the calling statement, so a
     * check of a database that brokers are writing sees one consistent
     * state. One row per problem (g, problem), then a last row with the
     * number of groups checked (those with a head, as chat_store_groups
     * lists them; every row of chat_groups is checked). */
    "CREATE OR REPLACE FUNCTION chat_check(OUT g text, OUT problem text, OUT n_groups bigint)\n"
    "RETURNS SETOF record LANGUAGE plpgsql STABLE AS $$\n"
    "DECLARE r record; gap record; n bigint := 0;\n"
    "BEGIN\n"
    "  n_groups := NULL;\n"
    /* per group: first and head, and the messages between them */
    "  FOR r IN SELECT gg.grp, gg.head, gg.first, gg.del_gen IS NOT NULL AS deleting,\n"
    "      count(mm.id) FILTER (WHERE mm.id >= gg.first AND mm.id <= gg.head) AS inside,\n"
    "      count(mm.id) FILTER (WHERE mm.id < gg.first) AS below, max(mm.id) AS highest\n"
    "      FROM chat_groups gg LEFT JOIN chat_messages mm ON mm.grp = gg.grp\n"
    "      GROUP BY gg.grp ORDER BY octet_length(gg.grp), gg.grp LOOP\n"
    "    g := r.grp;\n"
    "    IF r.head > 0 THEN n := n + 1; END IF;\n"
    "    IF r.first < 1 THEN\n"
    "      problem := format('first (%s) is below 1', r.first); RETURN NEXT;\n"
    "    ELSIF r.first > r.head + 1 THEN\n"
    "      problem := format('first (%s) is above head + 1 (%s)', r.first, r.head + 1);\n"
    "      RETURN NEXT;\n"
    "    END IF;\n"
    "    IF r.highest > r.head THEN\n"
    "      problem := format('head is %s but message %s is stored', r.head, r.highest);\n"
    "      RETURN NEXT;\n"
    "    END IF;\n"
    /* a deletion under way removes them step by step */
    "    IF r.below > 0 AND NOT r.deleting THEN\n"
    "      problem := format('%s messages below first (%s) are still stored', r.below,\n"
    "        r.first); RETURN NEXT;\n"
    "    END IF;\n"
    "    IF r.first >= 1 AND r.inside < r.head - r.first + 1 THEN\n"
    "      FOR gap IN SELECT x.prev + 1 AS lo, x.id - 1 AS hi FROM (SELECT i.id,\n"
    "          lag(i.id, 1, r.first - 1) OVER (ORDER BY i.id) AS prev FROM (\n"
    "          SELECT mm.id FROM chat_messages mm WHERE mm.grp = r.grp\n"
    "          AND mm.id >= r.first AND mm.id <= r.head UNION ALL SELECT r.head + 1) i) x\n"
    "          WHERE x.id > x.prev + 1 ORDER BY x.id LOOP\n"
    "        problem := format('messages %s to %s are missing', gap.lo, gap.hi); RETURN NEXT;\n"
    "      END LOOP;\n"
    "    END IF;\n"
    "  END LOOP;\n"
    "  FOR r IN SELECT mm.grp, count(*) AS k FROM chat_messages mm WHERE NOT EXISTS\n"
    "      (SELECT 1 FROM chat_groups gg WHERE gg.grp = mm.grp) GROUP BY mm.grp LOOP\n"
    "    g := r.grp;\n"
    "    problem := format('%s messages are stored but the group has no head', r.k);\n"
    "    RETURN NEXT;\n"
    "  END LOOP;\n"
    /* cursors, maximum cursors and memberships: none above head */
    "  FOR r IN SELECT cc.grp, cc.member, cc.device, cc.acked, coalesce(gg.head, 0) AS head\n"
    "      FROM chat_cursors cc LEFT JOIN chat_groups gg ON gg.grp = cc.grp\n"
    "      WHERE cc.acked > coalesce(gg.head, 0) LOOP\n"
    "    g := r.grp;\n"
    "    problem := format('the cursor of %s/%s is %s, above head %s', left(r.member, 200),\n"
    "      left(r.device, 200), r.acked, r.head); RETURN NEXT;\n"
    "  END LOOP;\n"
    "  FOR r IN SELECT x.grp, x.member, x.acked, coalesce(gg.head, 0) AS head\n"
    "      FROM chat_cursor_max x LEFT JOIN chat_groups gg ON gg.grp = x.grp\n"
    "      WHERE x.acked > coalesce(gg.head, 0) LOOP\n"
    "    g := r.grp;\n"
    "    problem := format('the maximum cursor of %s is %s, above head %s',\n"
    "      left(r.member, 200), r.acked, r.head); RETURN NEXT;\n"
    "  END LOOP;\n"
    "  FOR r IN SELECT mm.grp, mm.member, mm.joined, coalesce(gg.head, 0) AS head\n"
    "      FROM chat_members mm LEFT JOIN chat_groups gg ON gg.grp = mm.grp\n"
    "      WHERE mm.joined > coalesce(gg.head, 0) LOOP\n"
    "    g := r.grp;\n"
    "    problem := format('the membership of %s began at %s, above head %s',\n"
    "      left(r.member, 200), r.joined, r.head); RETURN NEXT;\n"
    "  END LOOP;\n"
    /* invariant cursor-forward: the member's maximum is at least every cursor of its
     * devices (expiry keeps it when the cursors go) */
    "  FOR r IN SELECT cc.grp, cc.member, cc.device, cc.acked, x.acked AS mx\n"
    "      FROM chat_cursors cc LEFT JOIN chat_cursor_max x\n"
    "      ON x.grp = cc.grp AND x.member = cc.member\n"
    "      WHERE x.acked IS NULL OR cc.acked > x.acked LOOP\n"
    "    g := r.grp;\n"
    "    problem := CASE WHEN r.mx IS NULL THEN format(\n"
    "      'the cursor of %s/%s has no maximum cursor record', left(r.member, 200),\n"
    "      left(r.device, 200)) ELSE format(\n"
    "      'the cursor of %s/%s (%s) is above the maximum cursor of %s (%s)',\n"
    "      left(r.member, 200), left(r.device, 200), r.acked, left(r.member, 200), r.mx) END;\n"
    "    RETURN NEXT;\n"
    "  END LOOP;\n"
    "  g := NULL; problem := NULL; n_groups := n;\n"
    "  RETURN NEXT;\n"
    "END $$;\n"
    "COMMIT;\n",
    NULL};

/* Ids above 2^63 - 1 do not exist in a bigint: the wrappers clamp them. */
const struct pg_statement pg_statements[PG_STMT_COUNT] = {
    [PG_STMT_HEAD] = {"chat_head", "SELECT head FROM chat_groups WHERE grp = $1", 1},
    [PG_STMT_FIRST] = {"chat_first", "SELECT first FROM chat_groups WHERE grp = $1", 1},
    [PG_STMT_APPEND] = {"chat_append",
                        "SELECT nid, nts, dup, env, rdm FROM chat_append($1, $2, $3, $4, $5, $6, "
                        "$7, $8)",
                        8},
    [PG_STMT_CID_FIND] = {"chat_cid_find",
                          "SELECT mm.id FROM chat_messages mm JOIN chat_groups gg ON gg.grp = "
                          "mm.grp WHERE mm.grp = $1 AND mm.sender = $2 AND mm.cid = $3 AND "
                          "mm.id >= gg.first",
                          3},
    [PG_STMT_GET] = {"chat_get",
                     "SELECT env FROM chat_messages WHERE grp = $1 AND id = $2 AND id >= "
                     "coalesce((SELECT first FROM chat_groups WHERE grp = $1), 1)",
                     2},
    /* A page: at most $3 + 1 rows, those past $4 bytes (after the first)
     * without their envelope, so that a page of small bounds reads little. */
    [PG_STMT_SCAN_FWD] = {"chat_scan_fwd",
                          "SELECT id, CASE WHEN rn = 1 OR cum <= $4 THEN env END FROM (SELECT "
                          "id, env, row_number() OVER w AS rn, sum(octet_length(env)) OVER w AS "
                          "cum FROM chat_messages WHERE grp = $1 AND id > $2 AND id >= "
                          "coalesce((SELECT first FROM chat_groups WHERE grp = $1), 1) WINDOW w "
                          "AS (ORDER BY id) ORDER BY id LIMIT $3 + 1) p ORDER BY id",
                          4},
    [PG_STMT_SCAN_BACK] = {"chat_scan_back",
                           "SELECT id, CASE WHEN rn = 1 OR cum <= $4 THEN env END FROM (SELECT "
                           "id, env, row_number() OVER w AS rn, sum(octet_length(env)) OVER w "
                           "AS cum FROM chat_messages WHERE grp = $1 AND id < $2 AND id >= "
                           "coalesce((SELECT first FROM chat_groups WHERE grp = $1), 1) WINDOW "
                           "w AS (ORDER BY id DESC) ORDER BY id DESC LIMIT $3 + 1) p ORDER BY "
                           "id DESC",
                           4},
    [PG_STMT_TRIM] = {"chat_trim", "SELECT chat_trim($1, $2, $3)", 3},
    [PG_STMT_GROUPS] = {"chat_groups",
                        "SELECT grp, head FROM chat_groups WHERE head > 0 AND ($1::text IS NULL "
                        "OR (octet_length(grp), grp) > (octet_length($1), $1)) ORDER BY "
                        "octet_length(grp), grp LIMIT $2 + 1",
                        2},
    [PG_STMT_CURSOR_INFO] = {"chat_cursor_info",
                             "SELECT acked, used FROM chat_cursors WHERE grp = $1 AND member = "
                             "$2 AND device = $3",
                             3},
    [PG_STMT_CURSOR_ADVANCE] = {"chat_cursor_advance",
                                "SELECT chat_cursor_advance($1, $2, $3, $4, $5)", 5},
    [PG_STMT_CURSOR_MAX] = {"chat_cursor_max",
                            "SELECT acked FROM chat_cursor_max WHERE grp = $1 AND member = $2", 2},
    [PG_STMT_CURSOR_START] = {"chat_cursor_start",
                              "SELECT cur, ok FROM chat_cursor_start($1, $2, $3, $4)", 4},
    [PG_STMT_CURSOR_TOUCH] = {"chat_cursor_touch",
                              "UPDATE chat_cursors SET used = $4 WHERE grp = $1 AND member = $2 "
                              "AND device = $3 AND used / 86400000 <> $4::bigint / 86400000",
                              4},
    [PG_STMT_EXPIRE] = {"chat_expire_devices",
                        "SELECT removed, members, done, lg, lm, ld FROM chat_expire_devices($1, "
                        "$2, $3, $4, $5, $6)",
                        6},
    [PG_STMT_MEMBER_ADD] = {"chat_member_add", "SELECT chat_member_add($1, $2)", 2},
    /* the join and its device's cursor: the joined id ($3 NULL: no device) */
    [PG_STMT_MEMBER_JOIN] = {"chat_member_join", "SELECT j FROM chat_member_join($1, $2, $3, $4)",
                             4},
    [PG_STMT_MEMBER_GET] = {"chat_member_get", "SELECT chat_member_joined($1, $2)", 2},
    [PG_STMT_MEMBER_REMOVE] = {"chat_member_remove", "SELECT chat_member_remove($1, $2)", 2},
    [PG_STMT_MEMBER_GROUPS] = {"chat_member_groups",
                               "SELECT mm.grp, mm.joined FROM chat_members mm LEFT JOIN "
                               "chat_groups gg ON gg.grp = mm.grp WHERE mm.member = $1 AND "
                               "(gg.del_gen IS NULL OR mm.gen = gg.del_gen) ORDER BY mm.grp",
                               1},
    [PG_STMT_GROUP_DELETE] = {"chat_group_delete", "SELECT chat_group_delete($1, $2)", 2},
    [PG_STMT_STATS] = {"chat_stats",
                       "SELECT (SELECT count(*) FROM chat_groups WHERE head > 0), "
                       "(SELECT sum(pg_total_relation_size(c)) FROM unnest(ARRAY['chat_groups', "
                       "'chat_messages', 'chat_members', 'chat_cursors', 'chat_cursor_max', "
                       "'chat_meta', 'chat_push']::regclass[]) c)::bigint",
                       0},
    /* Operations: listings in the order of the LevelDB backend's keys
     * (shorter names first), each at most $3 + 1 rows: the one past max
     * says whether there is more. */
    [PG_STMT_GROUP_MEMBERS] = {"chat_group_members",
                               "SELECT mm.member, mm.joined FROM chat_members mm LEFT JOIN "
                               "chat_groups gg ON gg.grp = mm.grp WHERE mm.grp = $1 AND "
                               "(gg.del_gen IS NULL OR mm.gen = gg.del_gen) AND ($2::text IS "
                               "NULL OR (octet_length(mm.member), mm.member) > "
                               "(octet_length($2::text), $2::text)) ORDER BY "
                               "octet_length(mm.member), mm.member LIMIT $3 + 1",
                               3},
    [PG_STMT_MEMBER_DEVICES] = {"chat_member_devices",
                                "SELECT device, acked, used FROM chat_cursors WHERE grp = $1 "
                                "AND member = $2 ORDER BY octet_length(device), device LIMIT "
                                "$3 + 1",
                                3},
    [PG_STMT_DELETIONS] = {"chat_deletions",
                           "SELECT grp FROM chat_groups WHERE del_gen IS NOT NULL ORDER BY grp", 0},
    [PG_STMT_GROUP_INIT] = {"chat_group_init", "SELECT chat_group_init($1, $2)", 2},
    [PG_STMT_CHECK] = {"chat_check", "SELECT g, problem, n_groups FROM chat_check()", 0},
    /* The watcher's: a followed group's head, and the messages other
     * brokers stored in it after an id, a page at a time. */
    [PG_STMT_FOLLOW_HEAD] = {"chat_follow_head",
                             "SELECT coalesce((SELECT head FROM chat_groups WHERE grp = $1), 0)",
                             1},
    /* Read markers and member counts (protocol v1.1): memberships that
     * count, as chat_member_joined has them; reads in byte order of the
     * names, at most $3 + 1 rows. */
    [PG_STMT_MEMBER_COUNT] = {"chat_member_count",
                              "SELECT count(*) FROM chat_members mm LEFT JOIN chat_groups gg ON "
                              "gg.grp = mm.grp WHERE mm.grp = $1 AND (gg.del_gen IS NULL OR "
                              "mm.gen = gg.del_gen)",
                              1},
    [PG_STMT_READ_ADVANCE] = {"chat_read_advance",
                              "SELECT rd, cur, moved, ok FROM chat_read_advance($1, $2, $3, "
                              "$4, $5)",
                              5},
    [PG_STMT_READ_GET] = {"chat_read_get",
                          "SELECT mm.read_id FROM chat_members mm LEFT JOIN chat_groups gg ON "
                          "gg.grp = mm.grp WHERE mm.grp = $1 AND mm.member = $2 AND "
                          "(gg.del_gen IS NULL OR mm.gen = gg.del_gen)",
                          2},
    [PG_STMT_READS] = {"chat_reads",
                       "SELECT mm.member, mm.read_id FROM chat_members mm LEFT JOIN chat_groups "
                       "gg ON gg.grp = mm.grp WHERE mm.grp = $1 AND (gg.del_gen IS NULL OR "
                       "mm.gen = gg.del_gen) AND ($2::text IS NULL OR mm.member > $2::text) "
                       "ORDER BY mm.member LIMIT $3 + 1",
                       3},
    [PG_STMT_CHANGE] = {"chat_change",
                        "SELECT nid, nts, ok, rdm FROM chat_change($1, $2, $3, $4, $5, $6, $7, $8, "
                        "$9, $10, $11, $12, $13, true, $14::bigint[], $15::bytea[], $16::bytea[])",
                        16},
    [PG_STMT_CID_OF] = {"chat_cid_of",
                        "SELECT cid FROM chat_messages WHERE grp = $1 AND id = $2 AND id >= "
                        "coalesce((SELECT first FROM chat_groups WHERE grp = $1), 1)",
                        2},
    /* Push registrations: a member's, one device's, and the registered
     * members of a group: at most $3 members that count after $2 (name
     * order), each with its registrations (none: one row of NULLs) and
     * what it has seen. */
    [PG_STMT_PUSH_PUT] = {"chat_push_put", "SELECT chat_push_put($1, $2, $3, $4, $5)", 5},
    [PG_STMT_PUSH_GET] = {"chat_push_get",
                          "SELECT reg, created FROM chat_push WHERE member = $1 AND device = $2",
                          2},
    [PG_STMT_PUSH_REMOVE] = {"chat_push_remove",
                             "DELETE FROM chat_push WHERE member = $1 AND device = $2 AND "
                             "($3::bytea IS NULL OR reg = $3::bytea) RETURNING 1",
                             3},
    [PG_STMT_PUSH_LIST] = {"chat_push_list",
                           "SELECT device, reg, created FROM chat_push WHERE member = $1 ORDER BY "
                           "octet_length(device), device",
                           1},
    [PG_STMT_PUSH_MEMBERS] = {"chat_push_members",
                              "SELECT mm.member, greatest(mm.joined, coalesce(x.acked, 0)), "
                              "p.device, p.reg FROM (SELECT m.member, m.joined FROM chat_members "
                              "m LEFT JOIN chat_groups gg ON gg.grp = m.grp WHERE m.grp = $1 AND "
                              "(gg.del_gen IS NULL OR m.gen = gg.del_gen) AND ($2::text IS NULL "
                              "OR m.member > $2::text) ORDER BY m.member LIMIT $3) mm LEFT JOIN "
                              "chat_cursor_max x ON x.grp = $1 AND x.member = mm.member LEFT "
                              "JOIN chat_push p ON p.member = mm.member ORDER BY mm.member, "
                              "octet_length(p.device), p.device",
                              3},
    [PG_STMT_PUSH_EXPIRE] = {"chat_push_expire",
                             "SELECT removed, done, lm, ld FROM chat_push_expire($1, $2, $3, $4)",
                             4},
    [PG_STMT_FOLLOW_FETCH] = {"chat_follow_fetch",
                              "SELECT id, env FROM chat_messages WHERE grp = $1 AND id > $2 AND "
                              "id <= $3 AND origin <> $4 ORDER BY id LIMIT 500",
                              4},
    /* A catch-up page (chat_store_scan_page): the group's head and first
     * id and chat_scan_fwd's rows, from one snapshot: a first row of
     * (head, first, NULL, NULL) when no message follows. A statement, not
     * a function: a database shared with older brokers needs nothing new. */
    [PG_STMT_PAGE] = {"chat_page",
                      "SELECT g.head, g.first, p.id, p.env FROM (SELECT coalesce(max(head), 0) "
                      "AS head, coalesce(max(first), 1) AS first FROM chat_groups WHERE grp = "
                      "$1) g LEFT JOIN LATERAL (SELECT id, CASE WHEN rn = 1 OR cum <= $4 THEN "
                      "env END AS env FROM (SELECT id, env, row_number() OVER w AS rn, "
                      "sum(octet_length(env)) OVER w AS cum FROM chat_messages WHERE grp = $1 "
                      "AND id > $2 AND id >= g.first WINDOW w AS (ORDER BY id) ORDER BY id "
                      "LIMIT $3 + 1) q) p ON true ORDER BY p.id",
                      4},
    /* chat_cursor_start and the head (chat_store_cursor_open), read from
     * the statement's snapshot, taken as it began. */
    [PG_STMT_CURSOR_OPEN] = {"chat_cursor_open",
                             "SELECT c.cur, c.ok, coalesce((SELECT head FROM chat_groups WHERE "
                             "grp = $1), 0) FROM chat_cursor_start($1, $2, $3, $4) c",
                             4},
};
