/*
 * dump.c: prints a classic BPF program, given in `tcpdump -ddd` form on
 * standard input (a count, then "code jt jf k" per line), with the
 * library's bpf_dump at levels 1, 2 and 3 (what `tcpdump -d`, `-dd` and
 * `-ddd` print), each followed by a line "--". debian.rs runs it on the
 * system libpcap to check that the candidate's `tcpdump -d`/`-dd`/`-ddd`
 * print one and the same program, as libpcap would print it.
 */
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
	unsigned n;
	if (scanf("%u", &n) != 1 || n > 100000) {
		fprintf(stderr, "dump: no instruction count\n");
		return 2;
	}
	struct bpf_insn *insns = calloc(n ? n : 1, sizeof *insns);
	for (unsigned i = 0; i < n; i++) {
		unsigned code, jt, jf, k;
		if (scanf("%u %u %u %u", &code, &jt, &jf, &k) != 4) {
			fprintf(stderr, "dump: instruction %u unreadable\n", i);
			return 2;
		}
		insns[i].code = (u_short)code;
		insns[i].jt = (u_char)jt;
		insns[i].jf = (u_char)jf;
		insns[i].k = k;
	}
	struct bpf_program prog = {n, insns};
	for (int level = 1; level <= 3; level++) {
		bpf_dump(&prog, level);
		printf("--\n");
	}
	free(insns);
	return 0;
}
