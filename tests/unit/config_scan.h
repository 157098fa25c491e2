/* config_scan: the scan cases of test_plugin_config_scan.c as
 * test_plugin_config.c's main runs them. */
#ifndef CHAT_CONFIG_SCAN_H
#define CHAT_CONFIG_SCAN_H

#include <limits.h>

/* This executable, which a scan runs again as "<self> --scan -c <file>":
 * set by main before the cases run. */
extern char config_self[PATH_MAX];

/* The child's side of a scan (main, given --scan): prints what
 * chat_broker_scan found; returns the exit status. */
int config_scan_child(void);

/* cmocka setup and teardown of the scan cases: a temporary directory. */
int config_tmp_setup(void **state);
int config_tmp_teardown(void **state);

void test_scan_lines(void **state);
void test_scan_include_dir(void **state);
void test_scan_fails_closed(void **state);

#endif
