/*
 * Differential helper for sluice-bpf's tests: runs the system libpcap's
 * bpf_filter() on programs and packets read from stdin and prints every
 * return value (one decimal per line).
 *
 * Input, line oriented:
 *   P <n>                       start a program of n instructions
 *   <code> <jt> <jf> <k>        n lines, decimal (tcpdump -ddd body)
 *   K <wirelen> <hex|->         run the current program on one packet
 *   I <n> <code> <jt> <jf> <k>  print bpf_image() of one instruction at n
 *
 * libpcap aborts on an unknown opcode and traps on a division by a
 * constant zero; such runs print "A" (SIGABRT), "F" (SIGFPE) or
 * "S" (SIGSEGV/SIGBUS) instead of a number, and the helper goes on.
 */
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <setjmp.h>

static sigjmp_buf env;

static void on_signal(int sig)
{
	siglongjmp(env, sig);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

int main(void)
{
	static char line[1 << 17];
	static unsigned char pkt[1 << 16];
	struct bpf_insn *prog = NULL;
	unsigned int n = 0, i;

	signal(SIGABRT, on_signal);
	signal(SIGFPE, on_signal);
	signal(SIGSEGV, on_signal);
	signal(SIGBUS, on_signal);
	while (fgets(line, sizeof line, stdin)) {
		if (line[0] == 'P') {
			n = (unsigned int)strtoul(line + 1, NULL, 10);
			free(prog);
			prog = calloc(n ? n : 1, sizeof *prog);
			for (i = 0; i < n; i++) {
				unsigned long c, jt, jf, k;
				if (!fgets(line, sizeof line, stdin)) return 2;
				if (sscanf(line, "%lu %lu %lu %lu", &c, &jt, &jf, &k) != 4) return 3;
				prog[i].code = (unsigned short)c;
				prog[i].jt = (unsigned char)jt;
				prog[i].jf = (unsigned char)jf;
				prog[i].k = (bpf_u_int32)k;
			}
		} else if (line[0] == 'I') {
			unsigned long nn, c, jt, jf, k;
			struct bpf_insn insn;
			if (sscanf(line + 1, "%lu %lu %lu %lu %lu", &nn, &c, &jt, &jf, &k) != 5) return 4;
			insn.code = (unsigned short)c;
			insn.jt = (unsigned char)jt;
			insn.jf = (unsigned char)jf;
			insn.k = (bpf_u_int32)k;
			printf("%s\n", bpf_image(&insn, (int)nn));
		} else if (line[0] == 'K') {
			char *p = line + 1, *hex;
			unsigned long wirelen = strtoul(p, &hex, 10);
			unsigned int len = 0;
			while (*hex == ' ') hex++;
			if (*hex != '-') {
				while (hexval(hex[0]) >= 0 && hexval(hex[1]) >= 0 && len < sizeof pkt) {
					pkt[len++] = (unsigned char)(hexval(hex[0]) * 16 + hexval(hex[1]));
					hex += 2;
				}
			}
			int sig = sigsetjmp(env, 1);
			if (sig == 0)
				printf("%u\n", bpf_filter(prog, pkt, (u_int)wirelen, len));
			else
				printf("%s\n", sig == SIGABRT ? "A" : sig == SIGFPE ? "F" : "S");
			fflush(stdout);
		}
	}
	fflush(stdout);
	return 0;
}
