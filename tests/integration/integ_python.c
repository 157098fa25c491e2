/* integ_python: runs a test written for python paho-mqtt (Debian's
 * python3-paho-mqtt: another MQTT client than ours, as app developers use)
 * against a real broker with the plugin, started here as every test's
 * broker is (tests/support): python3 <script> <port>.
 *
 *   integ_python <test name> <python3> <script>
 *
 * The script's exit status is the test's: 0 passes, anything else fails
 * (its stderr says why). Without that python3, or without paho-mqtt in it,
 * the test cannot run and exits 77 (ctest: skipped). */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SCRIPT_MS 60000 /* the script's own waits are 10 s each */

int main(int argc, char **argv)
{
    char port[16], out[600], err[600];

    if (argc != 4) {
        fprintf(stderr, "usage: integ_python <test name> <python3> <script>\n");
        return 2;
    }
    ts_init(argv[1]);
    {
        char *probe[] = {argv[2], "-c", "import paho.mqtt.client", NULL};
        if (access(argv[2], X_OK) != 0 || ts_run(probe, NULL, NULL, NULL, 20000) != 0) {
            ts_skip("%s cannot import paho.mqtt (apt-get install python3-paho-mqtt; "
                    "scripts/deps --test does)",
                    argv[2]);
        }
    }
    ts_broker *b = ts_broker_start(NULL);
    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    snprintf(out, sizeof out, "%s/python.out", ts_broker_dir(b));
    snprintf(err, sizeof err, "%s/python.err", ts_broker_dir(b));
    char *run[] = {argv[2], argv[3], port, NULL};
    int status = ts_run(run, NULL, out, err, SCRIPT_MS);
    char *said = ts_read_file(out, NULL), *why = ts_read_file(err, NULL);
    printf("%s%s", said ? said : "", why ? why : "");
    free(said);
    free(why);
    ASSERTF(status == 0, "%s exited with status %d", argv[3], status);
    ts_broker_destroy(b);
    return ts_pass();
}
