/*
 * compile_errors.c: what pcap_compile says, for tests/wording.rs.
 * Compiled at test time against the system <pcap/pcap.h>, linked with
 * -lpcap, and run once on the candidate library and once on the system
 * libpcap.
 *
 * Reads "DLT<TAB>EXPRESSION" lines on standard input (DLT a libpcap name,
 * or a number where the name is unknown to the library) and prints
 * "DLT<TAB>EXPRESSION<TAB>RESULT<TAB>MESSAGE" for each, RESULT being
 * pcap_compile's return value and MESSAGE pcap_geterr's text after a
 * failure, newlines shown as "\n".
 */
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
	static char line[65536];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		char *tab = strchr(line, '\t');
		if (tab == NULL)
			continue;
		*tab = 0;
		int dlt = pcap_datalink_name_to_val(line);
		if (dlt < 0)
			dlt = atoi(line);
		pcap_t *p = pcap_open_dead(dlt, 262144);
		if (p == NULL) {
			fprintf(stderr, "pcap_open_dead failed\n");
			return 1;
		}
		struct bpf_program prog;
		int r = pcap_compile(p, &prog, tab + 1, 1, PCAP_NETMASK_UNKNOWN);
		printf("%s\t%s\t%d\t", line, tab + 1, r);
		if (r != 0) {
			for (const char *c = pcap_geterr(p); *c; c++) {
				if (*c == '\n')
					fputs("\\n", stdout);
				else
					putchar(*c);
			}
		} else {
			pcap_freecode(&prog);
		}
		putchar('\n');
		pcap_close(p);
	}
	return 0;
}
