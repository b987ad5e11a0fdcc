/*
 * mutant.c: a deliberately wrong libpcap, to check that the ABI tests
 * can fail. It is not used by the tests themselves.
 *
 * It stands in for libpcap.so.0.8 and needs the real one by its full path
 * (so every function it does not define comes from there; the stub below
 * only gives the shim that NEEDED entry), and breaks the functions named
 * in SLUICE_ABI_MUTANT (comma-separated; unset: none):
 *
 *   dump     pcap_dump writes the last byte of each packet changed
 *   geterr   pcap_geterr adds a '.' to the message
 *   errbuf   pcap_open_offline* add a '.' to the error buffer message
 *   next     pcap_next_ex reports len + 1
 *   filter   bpf_filter accepts what it rejects when the length is a
 *            multiple of 7
 *   compile  pcap_compile swaps the branches of the last conditional jump
 *   name     pcap_datalink_val_to_name knows no name for 200
 *   stats    pcap_stats counts one packet more received
 *   loop     pcap_loop returns 0 where it returns -2 (breakloop)
 *
 * Build and use (from frontends/libpcap-abi):
 *   mkdir -p /tmp/mutant && echo > /tmp/mutant/stub.c
 *   cc -shared -fPIC -o /tmp/mutant/libstub.so /tmp/mutant/stub.c \
 *      -Wl,-soname,/usr/lib/x86_64-linux-gnu/libpcap.so.0.8
 *   cc -shared -fPIC -o /tmp/mutant/libpcap.so.0.8 tests/c/mutant.c \
 *      -Wl,--no-as-needed /tmp/mutant/libstub.so -ldl
 *   SLUICE_ABI_LIB=/tmp/mutant/libpcap.so.0.8 SLUICE_ABI_MUTANT=dump \
 *      cargo test -p sluice-libpcap-abi --test api
 * With SLUICE_ABI_MUTANT unset, every test passes on it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>

static int on(const char *what) {
	const char *m = getenv("SLUICE_ABI_MUTANT");
	if (!m) return 0;
	size_t n = strlen(what);
	for (const char *p = m; (p = strstr(p, what)) != NULL; p += n)
		if ((p == m || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
	return 0;
}

#define REAL(name, type) ((type)dlsym(RTLD_NEXT, #name))

void pcap_dump(u_char *user, const struct pcap_pkthdr *h, const u_char *sp) {
	void (*real)(u_char *, const struct pcap_pkthdr *, const u_char *) =
	    REAL(pcap_dump, void (*)(u_char *, const struct pcap_pkthdr *, const u_char *));
	if (!on("dump") || h->caplen == 0) {
		real(user, h, sp);
		return;
	}
	u_char *copy = malloc(h->caplen);
	memcpy(copy, sp, h->caplen);
	copy[h->caplen - 1] ^= 1;
	real(user, h, copy);
	free(copy);
}

char *pcap_geterr(pcap_t *p) {
	char *s = REAL(pcap_geterr, char *(*)(pcap_t *))(p);
	static char buf[PCAP_ERRBUF_SIZE + 2];
	if (!on("geterr")) return s;
	strncpy(buf, s, PCAP_ERRBUF_SIZE);
	strcat(buf, ".");
	return buf;
}

pcap_t *pcap_open_offline_with_tstamp_precision(const char *f, u_int prec, char *err) {
	pcap_t *p = REAL(pcap_open_offline_with_tstamp_precision,
			 pcap_t * (*)(const char *, u_int, char *))(f, prec, err);
	if (!p && on("errbuf") && strlen(err) + 1 < PCAP_ERRBUF_SIZE) strcat(err, ".");
	return p;
}

pcap_t *pcap_open_offline(const char *f, char *err) {
	return pcap_open_offline_with_tstamp_precision(f, PCAP_TSTAMP_PRECISION_MICRO, err);
}

int pcap_next_ex(pcap_t *p, struct pcap_pkthdr **h, const u_char **d) {
	static struct pcap_pkthdr copy;
	int r = REAL(pcap_next_ex, int (*)(pcap_t *, struct pcap_pkthdr **, const u_char **))(p, h, d);
	if (r == 1 && on("next")) {
		copy = **h;
		copy.len++;
		*h = &copy;
	}
	return r;
}

u_int bpf_filter(const struct bpf_insn *pc, const u_char *pkt, u_int wirelen, u_int buflen) {
	u_int r = REAL(bpf_filter, u_int(*)(const struct bpf_insn *, const u_char *, u_int, u_int))(
	    pc, pkt, wirelen, buflen);
	if (on("filter") && wirelen % 7 == 0) return r ? 0 : 65535;
	return r;
}

int pcap_compile(pcap_t *p, struct bpf_program *fp, const char *s, int opt, bpf_u_int32 mask) {
	int r = REAL(pcap_compile, int (*)(pcap_t *, struct bpf_program *, const char *, int,
					   bpf_u_int32))(p, fp, s, opt, mask);
	if (r == 0 && on("compile")) {
		for (int i = (int)fp->bf_len - 1; i >= 0; i--) {
			struct bpf_insn *in = &fp->bf_insns[i];
			if (BPF_CLASS(in->code) == BPF_JMP && BPF_OP(in->code) != BPF_JA &&
			    in->jt != in->jf) {
				u_char t = in->jt;
				in->jt = in->jf;
				in->jf = t;
				break;
			}
		}
	}
	return r;
}

const char *pcap_datalink_val_to_name(int dlt) {
	if (dlt == 200 && on("name")) return NULL;
	return REAL(pcap_datalink_val_to_name, const char *(*)(int))(dlt);
}

int pcap_stats(pcap_t *p, struct pcap_stat *ps) {
	int r = REAL(pcap_stats, int (*)(pcap_t *, struct pcap_stat *))(p, ps);
	if (r == 0 && on("stats")) ps->ps_recv++;
	return r;
}

int pcap_loop(pcap_t *p, int cnt, pcap_handler cb, u_char *user) {
	int r = REAL(pcap_loop, int (*)(pcap_t *, int, pcap_handler, u_char *))(p, cnt, cb, user);
	return r == PCAP_ERROR_BREAK && on("loop") ? 0 : r;
}
