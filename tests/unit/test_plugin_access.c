/* Unit tests of the one access policy (plugin/access.c, verdict.c,
 * broker.c): chat_access_decide as a table over where the plugin sits
 * (alone, or behind checkers that allow, deny, or cannot be asked) x
 * open/closed groups x who the client is x membership x every action, on
 * a real store with the broker stubbed; the read verdict remembered per
 * device and asked again when it may have changed; a persistent session
 * away. The broker's configuration and acl_files: test_plugin_broker_conf.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_fixture.h"
#include "test_plugin_access.h"

static const char *const opts[] = {"admins=root", NULL};

static int setup(void **state)
{
    struct plugin_fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    stub_reset();
    if (!plugin_fixture_open(fx, opts)) {
        free(fx);
        return -1;
    }
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct plugin_fixture *fx = *state;
    plugin_fixture_close(fx);
    free(fx);
    stub_reset();
    return 0;
}

/* Where the plugin sits, as the table runs it. */
enum where {
    ALONE = 0,    /* no other checker: our answer is the broker's */
    BEHIND_ALLOW, /* behind checkers that let the client read the group */
    BEHIND_DENY,  /* ... that do not */
    BEHIND_BLIND, /* ... that cannot be asked (no exported check) */
    WHERES
};

/* Who asks. */
enum who {
    ADMIN = 0, /* "root": a username in admins, verified where usernames are */
    NAMED,     /* "alice" */
    ANONYMOUS, /* no username */
    WHOS
};

static const char *const where_names[] = {"alone", "behind-allow", "behind-deny", "behind-blind"};
static const char *const who_names[] = {"admin", "named", "anonymous"};
static const char *const action_names[] = {"send",    "subscribe", "deliver",    "history",
                                           "inspect", "mark",      "mark-topic", "list",
                                           "online",  "push",      "join",       "admin"};

/* The rules of docs/protocol.md ("Membership and access"), restated on
 * their own: what the table expects. */
struct expect {
    bool allow;
    bool joined;
    bool pending;
};

static struct expect oracle(enum where w, bool verified_broker, bool open, enum who who,
                            bool member, enum chat_action a, bool members_may_read)
{
    struct expect e = {false, false, false};
    bool alone = w == ALONE;
    bool named = who != ANONYMOUS;
    bool verified = named && verified_broker;
    bool admin = who == ADMIN && verified;
    /* The broker's read verdict: allowed, denied, unknown. */
    bool bv_allow = alone || w == BEHIND_ALLOW;
    bool bv_deny = w == BEHIND_DENY;
    bool readable = bv_allow || (w == BEHIND_BLIND && members_may_read);

    if (a == CHAT_DO_ADMIN) {
        e.allow = admin;
        return e;
    }
    if (a == CHAT_DO_JOIN) {
        e.allow = open && alone;
        return e;
    }
    if (a == CHAT_DO_PUSH) {
        e.allow = readable;
        return e;
    }
    if (!open && !verified) {
        return e; /* closed groups need a verified username */
    }
    switch (a) {
    case CHAT_DO_SYNC:
        e.allow = true;
        break;
    case CHAT_DO_SEND:
        e.allow = member || open;
        e.joined = !member && open;
        break;
    case CHAT_DO_SUBSCRIBE:
        e.allow = member || open;
        e.joined = !member && open && bv_allow;
        e.pending = !member && open && !bv_allow;
        break;
    case CHAT_DO_DELIVER:
        e.allow = member;
        break;
    case CHAT_DO_INSPECT:
        e.allow = admin || (member && readable);
        break;
    case CHAT_DO_HISTORY:
    case CHAT_DO_LIST:
    case CHAT_DO_ONLINE:
        e.allow = member && readable;
        break;
    case CHAT_DO_MARK:
        e.allow = member && !bv_deny;
        break;
    case CHAT_DO_MARK_TOPIC:
        /* Published to the topic behind other checkers, it passed the
         * broker's write check: it joins an open group, even where the
         * broker then denies reading (a write-only member). */
        e.joined = !member && open && !alone;
        e.allow = (member || e.joined) && !bv_deny;
        break;
    default:
        break;
    }
    return e;
}

/* Places the plugin as w, with usernames verified or not. */
static void place(struct plugin_fixture *fx, enum where w, bool verified)
{
    chat_broker_set_test(&fx->pl, w == ALONE, verified, w == BEHIND_BLIND ? NULL : stub_acl_check);
    stub_acl_set_answer(w == BEHIND_DENY ? MOSQ_ERR_ACL_DENIED : MOSQ_ERR_SUCCESS);
}

static bool is_member(struct plugin_fixture *fx, struct mosquitto *c, const char *group)
{
    char name[CHAT_MEMBER_BUF];
    uint64_t since = 0;
    bool found = false;
    assert_null(chat_member(&fx->pl, c, name));
    assert_int_equal(chat_store_member_get(fx->pl.store, group, name, &since, &found), CHAT_OK);
    return found;
}

static void run_table(struct plugin_fixture *fx, bool members_may_read)
{
    unsigned n = 0;
    fx->pl.cfg.read_check = members_may_read ? CHAT_READ_MEMBERS : CHAT_READ_BROKER;
    for (int w = 0; w < WHERES; w++) {
        for (int verified = 0; verified < 2; verified++) {
            for (int open = 0; open < 2; open++) {
                for (int who = 0; who < WHOS; who++) {
                    for (int member = 0; member < 2; member++) {
                        for (int a = 0; a < CHAT_ACTIONS; a++) {
                            char group[64], id[32];
                            snprintf(group, sizeof(group), "g%u", n++);
                            snprintf(id, sizeof(id), "dev-%d", who);
                            struct mosquitto c = plugin_client(id, who == ADMIN   ? "root"
                                                                   : who == NAMED ? "alice"
                                                                                  : NULL);
                            place(fx, (enum where)w, verified);
                            fx->pl.cfg.open_groups = open;
                            if (member) {
                                char name[CHAT_MEMBER_BUF];
                                assert_null(chat_member(&fx->pl, &c, name));
                                assert_int_equal(
                                    chat_store_member_add(fx->pl.store, group, name, NULL),
                                    CHAT_OK);
                            }
                            struct expect e = oracle((enum where)w, verified, open, (enum who)who,
                                                     member, (enum chat_action)a, members_may_read);
                            struct chat_decision d =
                                chat_access_decide(&fx->pl, &c, a == CHAT_DO_ADMIN ? NULL : group,
                                                   (enum chat_action)a);
                            bool allowed = d.verdict == CHAT_ALLOW;
                            bool now_member = a == CHAT_DO_ADMIN ? false : is_member(fx, &c, group);
                            if (allowed != e.allow || d.joined != e.joined ||
                                d.pending != e.pending ||
                                (a != CHAT_DO_ADMIN && now_member != (member || e.joined)) ||
                                (!allowed && a != CHAT_DO_ADMIN && !d.why)) {
                                fail_msg("%s, usernames %sverified, %s group, %s, %smember, %s: "
                                         "got %s%s%s (%s), expected %s%s%s",
                                         where_names[w], verified ? "" : "not ",
                                         open ? "open" : "closed", who_names[who],
                                         member ? "" : "not a ", action_names[a],
                                         allowed ? "allow" : "deny", d.joined ? " joined" : "",
                                         d.pending ? " pending" : "", d.why ? d.why : "-",
                                         e.allow ? "allow" : "deny", e.joined ? " joined" : "",
                                         e.pending ? " pending" : "");
                            }
                        }
                    }
                }
            }
        }
    }
}

static void test_table(void **state)
{
    run_table(*state, false);
}

/* plugin_opt_read_check members: where the broker cannot be asked, the
 * operator says every member may read its groups. */
static void test_table_members_may_read(void **state)
{
    run_table(*state, true);
}

/* A few rows spelled out, the reasons with them (and a guard on the
 * oracle). */
static void test_reasons(void **state)
{
    struct plugin_fixture *fx = *state;
    struct mosquitto root = plugin_client("r1", "root");
    struct mosquitto anon = plugin_client("a1", NULL);
    struct chat_decision d;

    /* An admin whose username nobody verified is no admin. */
    place(fx, ALONE, false);
    d = chat_access_decide(&fx->pl, &root, NULL, CHAT_DO_ADMIN);
    assert_int_equal(d.verdict, CHAT_DENY);
    assert_non_null(strstr(d.why, "admin commands need a username the broker verifies"));
    place(fx, ALONE, true);
    assert_int_equal(chat_access_decide(&fx->pl, &root, NULL, CHAT_DO_ADMIN).verdict, CHAT_ALLOW);
    d = chat_access_decide(&fx->pl, &anon, NULL, CHAT_DO_ADMIN);
    assert_int_equal(d.verdict, CHAT_DENY);
    assert_null(d.why); /* the caller names the command refused */

    /* An admin inspects without joining. */
    d = chat_access_decide(&fx->pl, &root, "room", CHAT_DO_INSPECT);
    assert_int_equal(d.verdict, CHAT_ALLOW);
    assert_false(d.member);
    assert_false(is_member(fx, &root, "room"));
    d = chat_access_decide(&fx->pl, &root, "room", CHAT_DO_HISTORY);
    assert_string_equal(d.why, "not a member of the group");

    /* Closed groups need a verified username. */
    fx->pl.cfg.open_groups = false;
    place(fx, ALONE, false);
    d = chat_access_decide(&fx->pl, &root, "room", CHAT_DO_SEND);
    assert_non_null(strstr(d.why, "username the broker verifies"));
    fx->pl.cfg.open_groups = true;

    /* Behind checkers that cannot be asked: history refused, saying why. */
    place(fx, BEHIND_BLIND, true);
    assert_int_equal(chat_access_decide(&fx->pl, &root, "room", CHAT_DO_SEND).verdict, CHAT_ALLOW);
    d = chat_access_decide(&fx->pl, &root, "room", CHAT_DO_HISTORY);
    assert_non_null(strstr(d.why, "history is unavailable"));
    place(fx, BEHIND_DENY, true);
    d = chat_access_decide(&fx->pl, &root, "room", CHAT_DO_HISTORY);
    assert_string_equal(d.why, "the broker does not let you read this group");
    d = chat_access_decide(&fx->pl, &root, "other", CHAT_DO_JOIN);
    assert_non_null(strstr(d.why, "join by publishing or acking"));

    /* The answer on a chat topic allowed: final alone, deferred behind. */
    place(fx, ALONE, true);
    assert_int_equal(chat_access_pass(&fx->pl, &root), MOSQ_ERR_SUCCESS);
    place(fx, BEHIND_ALLOW, true);
    assert_int_equal(chat_access_pass(&fx->pl, &root), MOSQ_ERR_PLUGIN_DEFER);
}

/* The pushes to every device of a group use the verdict remembered per
 * device; what a client reads itself asks afresh; a change of the broker's
 * access configuration is asked again. */
static void test_verdict_remembered(void **state)
{
    struct plugin_fixture *fx = *state;
    struct mosquitto c = plugin_client("phone", "alice");
    place(fx, BEHIND_ALLOW, true);
    unsigned before = stub_acl_calls();
    for (int i = 0; i < 100; i++) {
        assert_int_equal(chat_access_decide(&fx->pl, &c, "room", CHAT_DO_PUSH).verdict, CHAT_ALLOW);
    }
    assert_int_equal(stub_acl_calls() - before, 2); /* one subscribe and one read question */
    /* A right taken away: the remembered verdict stands until the broker's
     * configuration is seen to change... */
    stub_acl_set_answer(MOSQ_ERR_ACL_DENIED);
    assert_int_equal(chat_access_decide(&fx->pl, &c, "room", CHAT_DO_PUSH).verdict, CHAT_ALLOW);
    /* ... but what the client reads itself is asked now, */
    assert_null(chat_member(&fx->pl, &c, (char[CHAT_MEMBER_BUF]){0}));
    assert_int_equal(chat_store_member_add(fx->pl.store, "room", "alice", NULL), CHAT_OK);
    assert_int_equal(chat_access_decide(&fx->pl, &c, "room", CHAT_DO_HISTORY).verdict, CHAT_DENY);
    /* and remembered: the next push is refused too. */
    assert_int_equal(chat_access_decide(&fx->pl, &c, "room", CHAT_DO_PUSH).verdict, CHAT_DENY);
    /* A change seen (a reload, a dynamic-security command): asked again. */
    stub_acl_set_answer(MOSQ_ERR_SUCCESS);
    chat_verdict_changed(&fx->pl);
    assert_int_equal(chat_access_decide(&fx->pl, &c, "room", CHAT_DO_PUSH).verdict, CHAT_ALLOW);
    /* A publish to dynamic-security's control topic is such a change. */
    stub_acl_set_answer(MOSQ_ERR_ACL_DENIED);
    struct mosquitto admin = plugin_client("ctl", "root");
    struct mosquitto_evt_acl_check ev = {
        .client = &admin, .topic = "$CONTROL/dynamic-security/v1", .access = MOSQ_ACL_WRITE};
    assert_int_equal(chat_on_acl(&fx->pl, &ev), MOSQ_ERR_PLUGIN_DEFER);
    assert_int_equal(chat_access_decide(&fx->pl, &c, "room", CHAT_DO_PUSH).verdict, CHAT_DENY);
    /* The client's verdicts go with it. */
    chat_verdict_forget_client(&fx->pl, "phone");
    before = stub_acl_calls();
    (void)chat_access_decide(&fx->pl, &c, "room", CHAT_DO_PUSH);
    assert_int_equal(stub_acl_calls() - before, 1); /* denied at the subscribe question */
}

/* A persistent session away: Mosquitto would queue live messages for it;
 * the plugin lets none through, and catches it up when it comes back. */
static void test_session_away(void **state)
{
    struct plugin_fixture *fx = *state;
    struct mosquitto old = plugin_client("phone", "alice");
    struct mosquitto now = plugin_client("phone", "alice");
    old.clean_session = now.clean_session = false; /* a persistent session */
    place(fx, ALONE, true);
    assert_int_equal(chat_store_member_add(fx->pl.store, "room", "alice", NULL), CHAT_OK);
    chat_peer_subscribed(&fx->pl, "phone", "room", true);
    assert_int_equal(chat_access_decide(&fx->pl, &old, "room", CHAT_DO_DELIVER).verdict,
                     CHAT_ALLOW);
    chat_peer_disconnected(&fx->pl, &old, CHAT_GONE_OFFLINE);
    assert_int_equal(chat_access_decide(&fx->pl, &old, "room", CHAT_DO_DELIVER).verdict, CHAT_DENY);
    /* Its new connection gets what the live flow brings. */
    assert_true(chat_peer_back(&fx->pl, &now, false));
    assert_int_equal(chat_access_decide(&fx->pl, &now, "room", CHAT_DO_DELIVER).verdict,
                     CHAT_ALLOW);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_table_members_may_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reasons, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verdict_remembered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_away, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conf_listeners, conf_tmp_setup, conf_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_conf_include_dir, conf_tmp_setup, conf_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_conf_unreadable, conf_tmp_setup, conf_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_conf_too_many, conf_tmp_setup, conf_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_aclfile_rules, conf_tmp_setup, conf_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_aclfile_refused, conf_tmp_setup, conf_tmp_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
