/*
 * bpf_filter and pcap_offline_filter, timed on whichever libpcap the
 * program is run with (scripts/bench-abi.py runs it on Debian's and on
 * sluice's). The capture's packets are read into memory first; each
 * expression is compiled by the library's own pcap_compile on a dead
 * handle of the capture's link type (as libtrace does), then run over
 * every packet ROUNDS times, passing the same instruction array each
 * time; the best of 7 such runs (in thread CPU time) is kept. Prints one line per expression and function: the expression,
 * the function, nanoseconds per call and the number of packets accepted
 * in one round (which must be the same on both libraries).
 *
 * Usage: bench-filter CAPTURE ROUNDS EXPRESSION...
 * Build: cc -O2 -o bench-filter scripts/bench-filter.c -lpcap
 */
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct pkt {
    struct pcap_pkthdr h;
    u_char *data;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    char err[PCAP_ERRBUF_SIZE];
    if (argc < 4) {
        fprintf(stderr, "usage: %s CAPTURE ROUNDS EXPRESSION...\n", argv[0]);
        return 2;
    }
    pcap_t *in = pcap_open_offline(argv[1], err);
    if (!in) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int rounds = atoi(argv[2]);
    size_t n = 0, cap = 1024;
    struct pkt *pkts = malloc(cap * sizeof *pkts);
    struct pcap_pkthdr *h;
    const u_char *d;
    while (pcap_next_ex(in, &h, &d) == 1) {
        if (n == cap)
            pkts = realloc(pkts, (cap *= 2) * sizeof *pkts);
        pkts[n].h = *h;
        pkts[n].data = malloc(h->caplen ? h->caplen : 1);
        memcpy(pkts[n].data, d, h->caplen);
        n++;
    }
    pcap_t *dead = pcap_open_dead(pcap_datalink(in), 262144);
    pcap_close(in);
    for (int e = 3; e < argc; e++) {
        struct bpf_program prog;
        if (pcap_compile(dead, &prog, argv[e], 1, PCAP_NETMASK_UNKNOWN)) {
            fprintf(stderr, "%s: %s\n", argv[e], pcap_geterr(dead));
            return 1;
        }
        for (int f = 0; f < 2; f++) {
            size_t accepted = 0;
            volatile u_int sink = 0;
            double best = 1e9;
            for (int rep = 0; rep < 7; rep++) {
            double t0 = now();
            for (int r = 0; r < rounds; r++) {
                size_t acc = 0;
                for (size_t i = 0; i < n; i++) {
                    u_int v = f == 0 ? bpf_filter(prog.bf_insns, pkts[i].data, pkts[i].h.len,
                                                  pkts[i].h.caplen)
                                     : (u_int)pcap_offline_filter(&prog, &pkts[i].h, pkts[i].data);
                    acc += v != 0;
                    sink += v;
                }
                accepted = acc;
            }
            double t = now() - t0;
            if (t < best)
                best = t;
            }
            double t = best;
            printf("%s\t%s\t%.1f\t%zu\n", argv[e], f == 0 ? "bpf_filter" : "pcap_offline_filter",
                   t * 1e9 / ((double)n * rounds), accepted);
        }
        pcap_freecode(&prog);
    }
    pcap_close(dead);
    return 0;
}
