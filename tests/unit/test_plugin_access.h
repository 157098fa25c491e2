/* test_plugin_access.h: the cases of test_plugin_broker_conf.c, which
 * test_plugin_access.c's main runs. */
#ifndef CHAT_TEST_PLUGIN_ACCESS_H
#define CHAT_TEST_PLUGIN_ACCESS_H

/* cmocka setup and teardown: a temporary directory with a stand-in for
 * mosquitto-chat's own .so. */
int conf_tmp_setup(void **state);
int conf_tmp_teardown(void **state);

void test_conf_listeners(void **state);
void test_conf_include_dir(void **state);
void test_conf_unreadable(void **state);
void test_conf_too_many(void **state);
void test_aclfile_rules(void **state);
void test_aclfile_refused(void **state);

#endif
