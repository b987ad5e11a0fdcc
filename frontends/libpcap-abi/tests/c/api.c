/*
 * api.c: pins libpcap's C ABI and exercises its offline API, for
 * tests/api.rs. Compiled at test time against the system <pcap/pcap.h>
 * and linked with -lpcap (NEEDED libpcap.so.0.8), then run once on the
 * candidate library (LD_LIBRARY_PATH) and once on the system libpcap.
 *
 * The structure layouts and constant values are checked at compile time
 * (_Static_assert): they pin the header every Debian program was built
 * with. Everything else prints a transcript on stdout, one line per check;
 * api.rs compares the two transcripts line by line, and the files written
 * by pcap_dump byte for byte.
 *
 * Lines starting with "~" hold text that may legitimately differ between
 * two correct libraries (the library's version string, the instructions
 * a compiler emits for an expression and their bpf_image text, the value
 * a compiled filter returns on accept, descriptor numbers, the capture
 * sources pcap_findalldevs lists that are not network interfaces). They read
 * "~ KEY ~ VALUE" and api.rs compares only KEY. Everything else, error
 * messages included, is compared exactly.
 *
 * Usage: api SCRATCH_DIR CORPUS_PCAPS_DIR (a capture on standard input)
 * It works inside SCRATCH_DIR with relative names, so that error messages
 * that quote a file name are the same in both runs; the capture on
 * standard input is read with the name "-".
 */
#include <pcap/pcap.h>
#include <sys/socket.h>
/* pcap_compile_nopcap is deprecated, and still exported. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the ABI: layouts (x86_64 Linux, LP64) ---- */
_Static_assert(sizeof(struct pcap_pkthdr) == 24, "pcap_pkthdr size");
_Static_assert(offsetof(struct pcap_pkthdr, ts) == 0, "pkthdr.ts");
_Static_assert(offsetof(struct pcap_pkthdr, caplen) == 16, "pkthdr.caplen");
_Static_assert(offsetof(struct pcap_pkthdr, len) == 20, "pkthdr.len");
_Static_assert(sizeof(struct bpf_program) == 16, "bpf_program size");
_Static_assert(offsetof(struct bpf_program, bf_len) == 0, "bf_len");
_Static_assert(offsetof(struct bpf_program, bf_insns) == 8, "bf_insns");
_Static_assert(sizeof(struct bpf_insn) == 8, "bpf_insn size");
_Static_assert(offsetof(struct bpf_insn, code) == 0, "insn.code");
_Static_assert(offsetof(struct bpf_insn, jt) == 2, "insn.jt");
_Static_assert(offsetof(struct bpf_insn, jf) == 3, "insn.jf");
_Static_assert(offsetof(struct bpf_insn, k) == 4, "insn.k");
_Static_assert(sizeof(struct pcap_stat) == 12, "pcap_stat size");
_Static_assert(offsetof(struct pcap_stat, ps_recv) == 0, "ps_recv");
_Static_assert(offsetof(struct pcap_stat, ps_drop) == 4, "ps_drop");
_Static_assert(offsetof(struct pcap_stat, ps_ifdrop) == 8, "ps_ifdrop");
_Static_assert(sizeof(struct pcap_if) == 40, "pcap_if size");
_Static_assert(offsetof(struct pcap_if, next) == 0, "if.next");
_Static_assert(offsetof(struct pcap_if, name) == 8, "if.name");
_Static_assert(offsetof(struct pcap_if, description) == 16, "if.description");
_Static_assert(offsetof(struct pcap_if, addresses) == 24, "if.addresses");
_Static_assert(offsetof(struct pcap_if, flags) == 32, "if.flags");
_Static_assert(sizeof(struct pcap_addr) == 40, "pcap_addr size");
_Static_assert(offsetof(struct pcap_addr, next) == 0, "addr.next");
_Static_assert(offsetof(struct pcap_addr, addr) == 8, "addr.addr");
_Static_assert(offsetof(struct pcap_addr, netmask) == 16, "addr.netmask");
_Static_assert(offsetof(struct pcap_addr, broadaddr) == 24, "addr.broadaddr");
_Static_assert(offsetof(struct pcap_addr, dstaddr) == 32, "addr.dstaddr");
_Static_assert(sizeof(struct pcap_file_header) == 24, "file header size");
_Static_assert(offsetof(struct pcap_file_header, magic) == 0, "fh.magic");
_Static_assert(offsetof(struct pcap_file_header, version_major) == 4, "fh.major");
_Static_assert(offsetof(struct pcap_file_header, version_minor) == 6, "fh.minor");
_Static_assert(offsetof(struct pcap_file_header, thiszone) == 8, "fh.thiszone");
_Static_assert(offsetof(struct pcap_file_header, sigfigs) == 12, "fh.sigfigs");
_Static_assert(offsetof(struct pcap_file_header, snaplen) == 16, "fh.snaplen");
_Static_assert(offsetof(struct pcap_file_header, linktype) == 20, "fh.linktype");

/* ---- the ABI: constants ---- */
_Static_assert(PCAP_ERRBUF_SIZE == 256, "errbuf");
_Static_assert(PCAP_VERSION_MAJOR == 2 && PCAP_VERSION_MINOR == 4, "version");
_Static_assert(PCAP_ERROR == -1 && PCAP_ERROR_BREAK == -2, "errors");
_Static_assert(PCAP_ERROR_NOT_ACTIVATED == -3 && PCAP_ERROR_ACTIVATED == -4, "errors");
_Static_assert(PCAP_ERROR_NO_SUCH_DEVICE == -5 && PCAP_ERROR_RFMON_NOTSUP == -6, "errors");
_Static_assert(PCAP_ERROR_NOT_RFMON == -7 && PCAP_ERROR_PERM_DENIED == -8, "errors");
_Static_assert(PCAP_ERROR_IFACE_NOT_UP == -9, "errors");
_Static_assert(PCAP_ERROR_CANTSET_TSTAMP_TYPE == -10, "errors");
_Static_assert(PCAP_ERROR_PROMISC_PERM_DENIED == -11, "errors");
_Static_assert(PCAP_ERROR_TSTAMP_PRECISION_NOTSUP == -12, "errors");
_Static_assert(PCAP_WARNING == 1 && PCAP_WARNING_PROMISC_NOTSUP == 2, "warnings");
_Static_assert(PCAP_WARNING_TSTAMP_TYPE_NOTSUP == 3, "warnings");
_Static_assert(PCAP_D_INOUT == 0 && PCAP_D_IN == 1 && PCAP_D_OUT == 2, "directions");
_Static_assert(PCAP_TSTAMP_PRECISION_MICRO == 0 && PCAP_TSTAMP_PRECISION_NANO == 1, "prec");
_Static_assert(PCAP_TSTAMP_HOST == 0 && PCAP_TSTAMP_HOST_LOWPREC == 1, "tstamp types");
_Static_assert(PCAP_TSTAMP_HOST_HIPREC == 2 && PCAP_TSTAMP_ADAPTER == 3, "tstamp types");
_Static_assert(PCAP_TSTAMP_ADAPTER_UNSYNCED == 4, "tstamp types");
_Static_assert(PCAP_TSTAMP_HOST_HIPREC_UNSYNCED == 5, "tstamp types");
_Static_assert(PCAP_NETMASK_UNKNOWN == 0xffffffffU, "netmask");
_Static_assert(PCAP_CHAR_ENC_LOCAL == 0 && PCAP_CHAR_ENC_UTF_8 == 1, "char enc");
_Static_assert(PCAP_IF_LOOPBACK == 1 && PCAP_IF_UP == 2 && PCAP_IF_RUNNING == 4, "if flags");
_Static_assert(DLT_NULL == 0 && DLT_EN10MB == 1 && DLT_PPP == 9, "dlt");
_Static_assert(DLT_RAW == 12 && DLT_IEEE802_11 == 105 && DLT_LOOP == 108, "dlt");
_Static_assert(DLT_LINUX_SLL == 113 && DLT_IEEE802_11_RADIO == 127, "dlt");
_Static_assert(DLT_LINUX_SLL2 == 276 && DLT_IPV4 == 228 && DLT_IPV6 == 229, "dlt");
_Static_assert(BPF_LD == 0 && BPF_RET == 6 && BPF_MISC == 7 && BPF_K == 0, "bpf");

static char errbuf[PCAP_ERRBUF_SIZE];

/* FNV-1a, 64 bits: a digest of headers and bytes. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ULL;
	}
	return h;
}
#define FNV0 14695981039346656037ULL

struct digest {
	uint64_t h;
	long n;
	pcap_t *p;
	int stop_after; /* call pcap_breakloop after this many packets, or 0 */
};

static uint64_t hdr_hash(uint64_t h, const struct pcap_pkthdr *hdr, const u_char *data) {
	int64_t sec = hdr->ts.tv_sec, usec = hdr->ts.tv_usec;
	uint32_t cl = hdr->caplen, len = hdr->len;
	h = fnv(h, &sec, 8);
	h = fnv(h, &usec, 8);
	h = fnv(h, &cl, 4);
	h = fnv(h, &len, 4);
	return fnv(h, data, hdr->caplen);
}

static void digest_cb(u_char *user, const struct pcap_pkthdr *hdr, const u_char *data) {
	struct digest *d = (struct digest *)user;
	d->h = hdr_hash(d->h, hdr, data);
	d->n++;
	if (d->stop_after && d->n == d->stop_after)
		pcap_breakloop(d->p);
}

static const char *str(const char *s) { return s ? s : "(null)"; }

/* An open error: the handle or the error buffer. */
static pcap_t *opened(const char *what, pcap_t *p) {
	if (!p)
		printf("%s: NULL err=%s\n", what, errbuf);
	return p;
}

static void header_facts(const char *tag, pcap_t *p) {
	printf("%s: datalink=%d snapshot=%d major=%d minor=%d swapped=%d file=%d prec=%d\n", tag,
	       pcap_datalink(p), pcap_snapshot(p), pcap_major_version(p), pcap_minor_version(p),
	       pcap_is_swapped(p), pcap_file(p) != NULL, pcap_get_tstamp_precision(p));
}

/* Every packet by pcap_next_ex, with nanosecond stamps beside the
 * microsecond ones (a second handle), then the end-of-file results. */
static void per_packet(const char *name) {
	pcap_t *p = opened("open", pcap_open_offline(name, errbuf));
	pcap_t *q = opened("open nano", pcap_open_offline_with_tstamp_precision(
					       name, PCAP_TSTAMP_PRECISION_NANO, errbuf));
	if (!p || !q) {
		if (p) pcap_close(p);
		if (q) pcap_close(q);
		return;
	}
	header_facts("micro", p);
	header_facts("nano", q);
	for (int i = 0;; i++) {
		struct pcap_pkthdr *h, *hn;
		const u_char *d, *dn;
		int r = pcap_next_ex(p, &h, &d);
		int rn = pcap_next_ex(q, &hn, &dn);
		if (r != 1 || rn != 1) {
			printf("next_ex end=%d nano=%d", r, rn);
			if (r == -1) printf(" err=%s", pcap_geterr(p));
			r = pcap_next_ex(p, &h, &d);
			printf(" again=%d\n", r);
			break;
		}
		printf("pkt %d caplen=%u len=%u sec=%ld usec=%ld nsec=%ld same=%d h=%016llx\n", i,
		       h->caplen, h->len, (long)h->ts.tv_sec, (long)h->ts.tv_usec,
		       (long)hn->ts.tv_usec, h->caplen == hn->caplen && !memcmp(d, dn, h->caplen),
		       (unsigned long long)fnv(FNV0, d, h->caplen));
	}
	pcap_close(p);
	pcap_close(q);
}

/* pcap_fopen_offline, pcap_loop, pcap_dispatch, pcap_next, breakloop. */
static void reading(const char *name) {
	FILE *fp = fopen(name, "rb");
	pcap_t *p = fp ? opened("fopen", pcap_fopen_offline(fp, errbuf)) : NULL;
	if (!p) return;
	struct digest d = {FNV0, 0, p, 0};
	int r = pcap_loop(p, -1, digest_cb, (u_char *)&d);
	int r2 = pcap_loop(p, -1, digest_cb, (u_char *)&d);
	printf("fopen: file_is_fp=%d loop=%d again=%d n=%ld h=%016llx\n", pcap_file(p) == fp, r,
	       r2, d.n, (unsigned long long)d.h);
	pcap_close(p);

	int cnts[] = {-1, 0, 3};
	for (int c = 0; c < 3; c++) {
		p = opened("open", pcap_open_offline(name, errbuf));
		if (!p) return;
		struct digest e = {FNV0, 0, p, 0};
		printf("dispatch %d:", cnts[c]);
		for (int k = 0; k < 200; k++) {
			int r = pcap_dispatch(p, cnts[c], digest_cb, (u_char *)&e);
			printf(" %d", r);
			if (r <= 0) break;
		}
		printf(" n=%ld h=%016llx\n", e.n, (unsigned long long)e.h);
		pcap_close(p);
	}

	p = opened("open", pcap_open_offline(name, errbuf));
	if (!p) return;
	struct digest f = {FNV0, 0, p, 0};
	struct pcap_pkthdr h;
	const u_char *data;
	while ((data = pcap_next(p, &h)) != NULL)
		digest_cb((u_char *)&f, &h, data);
	printf("next: n=%ld h=%016llx\n", f.n, (unsigned long long)f.h);
	pcap_close(p);

	/* pcap_loop with a count, then breakloop from inside the callback. */
	p = opened("open", pcap_open_offline(name, errbuf));
	if (!p) return;
	struct digest g = {FNV0, 0, p, 0};
	r = pcap_loop(p, 2, digest_cb, (u_char *)&g);
	printf("loop 2: %d n=%ld", r, g.n);
	g.stop_after = g.n + 1;
	r = pcap_loop(p, -1, digest_cb, (u_char *)&g);
	printf(" break: %d n=%ld", r, g.n);
	g.stop_after = g.n + 2;
	r = pcap_dispatch(p, -1, digest_cb, (u_char *)&g);
	r2 = pcap_dispatch(p, -1, digest_cb, (u_char *)&g);
	g.stop_after = 0;
	int r3 = pcap_loop(p, 0, digest_cb, (u_char *)&g);
	printf(" dispatch-break: %d %d rest: %d n=%ld h=%016llx\n", r, r2, r3, g.n,
	       (unsigned long long)g.h);
	pcap_close(p);
}

/* Filters: compile optimised and not, setfilter, offline_filter and
 * bpf_filter verdicts per packet. */
static const char *FILTERS[] = {
    "", "tcp", "udp port 53", "vlan", "ip6 and not tcp", "ether broadcast or ether multicast",
    "len > 100", "greater 200 and ip", "arp or stp", "icmp or icmp6", "tcp[tcpflags] & tcp-syn != 0",
};
#define NFILTERS (sizeof FILTERS / sizeof FILTERS[0])

static void filtering(const char *name) {
	for (size_t e = 0; e < NFILTERS; e++) {
		for (int opt = 0; opt < 2; opt++) {
			pcap_t *p = opened("open", pcap_open_offline(name, errbuf));
			if (!p) return;
			struct bpf_program prog;
			int r = pcap_compile(p, &prog, FILTERS[e], opt, PCAP_NETMASK_UNKNOWN);
			printf("filter '%s' opt=%d compile=%d", FILTERS[e], opt, r);
			if (r != 0) {
				printf(" err=%s\n", pcap_geterr(p));
				pcap_close(p);
				continue;
			}
			printf(" valid=%d", bpf_validate(prog.bf_insns, (int)prog.bf_len));
			/* Verdicts of both entry points, packet by packet. */
			pcap_t *q = pcap_open_offline(name, errbuf);
			struct pcap_pkthdr *h;
			const u_char *d;
			char bits[4096];
			size_t nb = 0;
			uint32_t accept_value = 0;
			int agree = 1;
			while (q && pcap_next_ex(q, &h, &d) == 1 && nb + 1 < sizeof bits) {
				int a = pcap_offline_filter(&prog, h, d);
				u_int b = bpf_filter(prog.bf_insns, d, h->len, h->caplen);
				agree &= (a == (int)b);
				if (b) accept_value = b;
				bits[nb++] = b ? '1' : '0';
			}
			bits[nb] = 0;
			if (q) pcap_close(q);
			printf(" agree=%d verdicts=%s\n", agree, bits);
			printf("~ accept value '%s' opt=%d ~ %u insns=%u\n", FILTERS[e], opt,
			       accept_value, prog.bf_len);
			r = pcap_setfilter(p, &prog);
			pcap_freecode(&prog);
			struct digest dg = {FNV0, 0, p, 0};
			int lr = pcap_loop(p, -1, digest_cb, (u_char *)&dg);
			printf("setfilter=%d loop=%d n=%ld h=%016llx\n", r, lr, dg.n,
			       (unsigned long long)dg.h);
			pcap_close(p);
		}
	}
}

/* pcap_dump of every packet, micro and nano: the files are compared by
 * api.rs. */
static void dumping(const char *name, const char *base) {
	for (int prec = 0; prec < 2; prec++) {
		pcap_t *p = opened("open", pcap_open_offline_with_tstamp_precision(name, prec, errbuf));
		if (!p) return;
		char out[600];
		snprintf(out, sizeof out, "dump-%s.%s.pcap", base, prec ? "ns" : "us");
		pcap_dumper_t *dp = pcap_dump_open(p, out);
		if (!dp) {
			printf("dump_open %s: NULL err=%s\n", out, pcap_geterr(p));
			pcap_close(p);
			continue;
		}
		long t0 = pcap_dump_ftell(dp);
		int r = pcap_loop(p, -1, pcap_dump, (u_char *)dp);
		int fl = pcap_dump_flush(dp);
		printf("dump %s: ftell0=%ld loop=%d flush=%d ftell=%ld ftell64=%lld file=%d\n", out, t0,
		       r, fl, pcap_dump_ftell(dp), (long long)pcap_dump_ftell64(dp),
		       pcap_dump_file(dp) != NULL);
		pcap_dump_close(dp);
		pcap_close(p);
	}
}

static void every_capture(const char *dir) {
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort);
	if (n < 0) {
		printf("scandir failed\n");
		return;
	}
	for (int i = 0; i < n; i++) {
		const char *b = ents[i]->d_name;
		if (b[0] != '.') {
			char path[4096];
			snprintf(path, sizeof path, "%s/%s", dir, b);
			printf("== %s\n", b);
			per_packet(path);
			reading(path);
			filtering(path);
			dumping(path, b);
		}
		free(ents[i]);
	}
	free(ents);
}

static void write_file(const char *name, const void *data, size_t n) {
	FILE *f = fopen(name, "wb");
	fwrite(data, 1, n, f);
	fclose(f);
}

static void try_open(const char *name) {
	pcap_t *p = pcap_open_offline(name, errbuf);
	if (!p) {
		printf("open '%s': NULL err=%s\n", name, errbuf);
		return;
	}
	printf("open '%s': ok datalink=%d snapshot=%d swapped=%d major=%d minor=%d\n", name,
	       pcap_datalink(p), pcap_snapshot(p), pcap_is_swapped(p), pcap_major_version(p),
	       pcap_minor_version(p));
	struct pcap_pkthdr *h;
	const u_char *d;
	int r;
	int k = 0;
	while ((r = pcap_next_ex(p, &h, &d)) == 1)
		printf("  pkt %d caplen=%u len=%u sec=%ld usec=%ld h=%016llx\n", k++, h->caplen, h->len,
		       (long)h->ts.tv_sec, (long)h->ts.tv_usec,
		       (unsigned long long)fnv(FNV0, d, h->caplen));
	printf("  end=%d", r);
	if (r == -1) printf(" err=%s", pcap_geterr(p));
	printf("\n");
	pcap_close(p);
}

static void put32(unsigned char *b, uint32_t v, int big) {
	for (int i = 0; i < 4; i++) b[big ? 3 - i : i] = (unsigned char)(v >> (8 * i));
}
static void put16(unsigned char *b, uint16_t v, int big) {
	b[big ? 1 : 0] = (unsigned char)v;
	b[big ? 0 : 1] = (unsigned char)(v >> 8);
}

/* A pcap file header, little or big endian. */
static void file_header(unsigned char *b, uint32_t magic, int major, int minor, uint32_t snaplen,
			uint32_t linktype, int big) {
	put32(b, magic, big);
	put16(b + 4, (uint16_t)major, big);
	put16(b + 6, (uint16_t)minor, big);
	put32(b + 8, 0, big);
	put32(b + 12, 0, big);
	put32(b + 16, snaplen, big);
	put32(b + 20, linktype, big);
}
static void record(unsigned char *b, uint32_t sec, uint32_t frac, uint32_t caplen, uint32_t len,
		   int big) {
	put32(b, sec, big);
	put32(b + 4, frac, big);
	put32(b + 8, caplen, big);
	put32(b + 12, len, big);
}

/* Opening what is not a good capture, and odd but valid ones. */
static void open_errors(void) {
	unsigned char b[4096];
	memset(b, 0xab, sizeof b);
	try_open("does-not-exist.pcap");
	mkdir("a-directory", 0755);
	try_open("a-directory");
	write_file("empty.bin", b, 0);
	try_open("empty.bin");
	write_file("text.txt", "hello, this is not a capture file at all\n", 41);
	try_open("text.txt");
	file_header(b, 0xa1b2c3d4, 2, 4, 65535, 1, 0);
	write_file("short-header.pcap", b, 10);
	try_open("short-header.pcap");
	write_file("magic-only.pcap", b, 4);
	try_open("magic-only.pcap");
	file_header(b, 0xa1b2c3d4, 1, 0, 65535, 1, 0);
	write_file("old-version.pcap", b, 24);
	try_open("old-version.pcap");
	file_header(b, 0xa1b2c3d4, 3, 0, 65535, 1, 0);
	write_file("new-version.pcap", b, 24);
	try_open("new-version.pcap");
	file_header(b, 0xa1b2c3d4, 2, 4, 0, 1, 0);
	write_file("snaplen-0.pcap", b, 24);
	try_open("snaplen-0.pcap");
	/* Headers only, then records cut short or too long. */
	for (int big = 0; big < 2; big++) {
		for (int nano = 0; nano < 2; nano++) {
			char name[64];
			uint32_t magic = nano ? 0xa1b23c4d : 0xa1b2c3d4;
			file_header(b, magic, 2, 4, 1500, 1, big);
			record(b + 24, 1700000000, nano ? 123456789 : 123456, 60, 60, big);
			for (int i = 0; i < 60; i++) b[40 + i] = (unsigned char)i;
			record(b + 100, 1700000001, 5, 30, 1514, big);
			snprintf(name, sizeof name, "good-%s-%s.pcap", big ? "be" : "le",
				 nano ? "ns" : "us");
			write_file(name, b, 24 + 16 + 60 + 16 + 30);
			try_open(name);
			snprintf(name, sizeof name, "cut-record-header-%d-%d.pcap", big, nano);
			write_file(name, b, 24 + 16 + 60 + 5);
			try_open(name);
			snprintf(name, sizeof name, "cut-record-data-%d-%d.pcap", big, nano);
			write_file(name, b, 24 + 16 + 60 + 16 + 10);
			try_open(name);
		}
	}
	/* A record longer than the largest snapshot libpcap accepts. */
	file_header(b, 0xa1b2c3d4, 2, 4, 65535, 1, 0);
	record(b + 24, 1, 2, 300000, 300000, 0);
	write_file("huge-caplen.pcap", b, 200);
	try_open("huge-caplen.pcap");
	/* caplen above the file's snaplen but within limits. */
	file_header(b, 0xa1b2c3d4, 2, 4, 64, 1, 0);
	record(b + 24, 1, 2, 100, 100, 0);
	write_file("over-snaplen.pcap", b, 24 + 16 + 100);
	try_open("over-snaplen.pcap");
	/* caplen above len. */
	file_header(b, 0xa1b2c3d4, 2, 4, 65535, 1, 0);
	record(b + 24, 1, 2, 50, 20, 0);
	write_file("caplen-over-len.pcap", b, 24 + 16 + 50);
	try_open("caplen-over-len.pcap");
	/* Another link type, an unknown one, and a modified-pcap magic. */
	file_header(b, 0xa1b2c3d4, 2, 4, 65535, 113, 0);
	write_file("sll.pcap", b, 24);
	try_open("sll.pcap");
	file_header(b, 0xa1b2c3d4, 2, 4, 65535, 60000, 0);
	write_file("unknown-linktype.pcap", b, 24);
	try_open("unknown-linktype.pcap");
	file_header(b, 0xa1b2cd34, 2, 4, 65535, 1, 0);
	write_file("kuznetzov.pcap", b, 24);
	try_open("kuznetzov.pcap");
	/* pcapng: a section header block cut short, and a bad block length. */
	static const unsigned char shb[] = {
	    0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, 0x01, 0x00,
	    0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1c, 0x00, 0x00, 0x00};
	write_file("shb-cut.pcapng", shb, 20);
	try_open("shb-cut.pcapng");
	write_file("shb-only.pcapng", shb, sizeof shb);
	try_open("shb-only.pcapng");
	unsigned char bad[sizeof shb];
	memcpy(bad, shb, sizeof shb);
	bad[4] = 0x0d;
	write_file("shb-badlen.pcapng", bad, sizeof bad);
	try_open("shb-badlen.pcapng");
	memcpy(bad, shb, sizeof shb);
	bad[12] = 0x02;
	write_file("shb-version.pcapng", bad, sizeof bad);
	try_open("shb-version.pcapng");
	/* Standard input. */
	try_open("-");
	/* Precision argument out of range. */
	pcap_t *p = pcap_open_offline_with_tstamp_precision("good-le-us.pcap", 7, errbuf);
	printf("open precision 7: %s err=%s\n", p ? "ok" : "NULL", p ? "" : errbuf);
	if (p) pcap_close(p);
	p = pcap_fopen_offline_with_tstamp_precision(fopen("good-le-ns.pcap", "rb"), 0, errbuf);
	printf("fopen ns as micro: %s\n", p ? "ok" : errbuf);
	if (p) {
		struct pcap_pkthdr *h;
		const u_char *d;
		if (pcap_next_ex(p, &h, &d) == 1) printf("  usec=%ld\n", (long)h->ts.tv_usec);
		pcap_close(p);
	}
}

/* Bad expressions, on a dead handle, and what pcap_geterr says. */
static void compile_errors(void) {
	static const char *bad[] = {
	    "tcp port", "ip host 1.2.3", "foo", "port 99999", "ether host zz:zz",
	    "tcp[100000]", "vlan 5000", "ip proto nosuchproto", "(tcp", "tcp)", "net 10.0.0.1/33",
	    "len > ", "ether[0] & 0x", "host", "src or", "1 = 2 = 3", "ip and ip6 and arp", "gateway foo",
	    "ether proto \\nosuch", "ip6 net ::1/200", "tcp and ( udp",
	};
	pcap_t *p = pcap_open_dead(DLT_EN10MB, 65535);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct bpf_program prog;
		int r = pcap_compile(p, &prog, bad[i], 1, PCAP_NETMASK_UNKNOWN);
		printf("compile '%s': %d err=%s\n", bad[i], r, r ? pcap_geterr(p) : "");
		if (r == 0) pcap_freecode(&prog);
	}
	/* An expression that rejects everything: an error only when optimised. */
	for (int opt = 0; opt < 2; opt++) {
		struct bpf_program prog;
		int r = pcap_compile(p, &prog, "ip and not ip", opt, PCAP_NETMASK_UNKNOWN);
		printf("compile 'ip and not ip' opt=%d: %d err=%s\n", opt, r, r ? pcap_geterr(p) : "");
		if (r == 0) pcap_freecode(&prog);
	}
	pcap_close(p);
	/* Link types where an expression means nothing. */
	int dlts[] = {DLT_RAW, DLT_LINUX_SLL, DLT_NULL, DLT_IEEE802_11, DLT_LINUX_SLL2, 147};
	const char *exprs[] = {"ether host 1:2:3:4:5:6", "vlan", "tcp", "wlan type mgt", "arp"};
	for (size_t i = 0; i < sizeof dlts / sizeof dlts[0]; i++) {
		p = pcap_open_dead(dlts[i], 65535);
		for (size_t e = 0; e < sizeof exprs / sizeof exprs[0]; e++) {
			struct bpf_program prog;
			int r = pcap_compile(p, &prog, exprs[e], 1, PCAP_NETMASK_UNKNOWN);
			printf("dlt %d compile '%s': %d err=%s\n", dlts[i], exprs[e], r,
			       r ? pcap_geterr(p) : "");
			if (r == 0) {
				printf("~ dlt %d '%s' ~ insns %u\n", dlts[i], exprs[e], prog.bf_len);
				pcap_freecode(&prog);
			}
		}
		pcap_close(p);
	}
	/* A NULL expression is taken as an empty one (accept everything);
	 * pcap_setfilter(p, NULL) is not tried: libpcap 1.10.3 crashes. */
	{
		pcap_t *d = pcap_open_dead(DLT_EN10MB, 65535);
		struct bpf_program prog;
		const u_char pkt[20] = {0};
		int r = pcap_compile(d, &prog, NULL, 1, PCAP_NETMASK_UNKNOWN);
		printf("compile NULL: %d accepts=%d\n", r,
		       r == 0 ? bpf_filter(prog.bf_insns, pkt, 20, 20) != 0 : -1);
		if (r == 0) pcap_freecode(&prog);
		pcap_close(d);
	}
	/* pcap_compile_nopcap. */
	for (int opt = 0; opt < 2; opt++) {
		struct bpf_program prog;
		int r = pcap_compile_nopcap(65535, DLT_EN10MB, &prog, "udp and port 53", opt,
					    PCAP_NETMASK_UNKNOWN);
		printf("compile_nopcap opt=%d: %d valid=%d\n", opt, r,
		       r == 0 ? bpf_validate(prog.bf_insns, (int)prog.bf_len) : -1);
		if (r == 0) pcap_freecode(&prog);
		r = pcap_compile_nopcap(65535, DLT_EN10MB, &prog, "udp and port", opt,
					PCAP_NETMASK_UNKNOWN);
		printf("compile_nopcap bad opt=%d: %d\n", opt, r);
	}
	/* With a netmask: "ip broadcast" needs one. */
	p = pcap_open_dead(DLT_EN10MB, 65535);
	struct bpf_program prog;
	int r = pcap_compile(p, &prog, "ip broadcast", 1, PCAP_NETMASK_UNKNOWN);
	printf("compile 'ip broadcast' unknown mask: %d err=%s\n", r, r ? pcap_geterr(p) : "");
	if (r == 0) pcap_freecode(&prog);
	r = pcap_compile(p, &prog, "ip broadcast", 1, 0xffffff00);
	printf("compile 'ip broadcast' /24: %d\n", r);
	if (r == 0) {
		/* A dead handle takes no filter at all. */
		int s = pcap_setfilter(p, &prog);
		printf("setfilter dead: %d err=%s\n", s, s ? pcap_geterr(p) : "");
		pcap_freecode(&prog);
	}
	pcap_close(p);
	/* setfilter with an empty program and one that is not valid, on an
	 * offline handle. */
	p = opened("open", pcap_open_offline("good-le-us.pcap", errbuf));
	if (!p) return;
	struct bpf_program empty = {0, NULL};
	r = pcap_setfilter(p, &empty);
	printf("setfilter empty: %d err=%s\n", r, r ? pcap_geterr(p) : "");
	struct bpf_insn jump_out[] = {{BPF_JMP | BPF_JA, 0, 0, 5}, {BPF_RET | BPF_K, 0, 0, 1}};
	struct bpf_program invalid = {2, jump_out};
	r = pcap_setfilter(p, &invalid);
	printf("setfilter invalid: %d err=%s\n", r, r ? pcap_geterr(p) : "");
	pcap_close(p);
	/* pcap_offline_filter and bpf_filter without instructions. */
	struct pcap_pkthdr h = {{0, 0}, 4, 4};
	const u_char pkt[4] = {1, 2, 3, 4};
	printf("offline_filter NULL insns: %d\n", pcap_offline_filter(&empty, &h, pkt));
	printf("bpf_filter NULL: %u\n", bpf_filter(NULL, pkt, 4, 4));
	pcap_freecode(&empty);
	printf("freecode empty: ok\n");
}

/* Hand-made instructions: bpf_image text, bpf_validate and bpf_filter
 * values are pure functions of the instructions, so compared exactly. */
static void instructions(void) {
	static const struct bpf_insn insns[] = {
	    {BPF_LD | BPF_W | BPF_ABS, 0, 0, 2},
	    {BPF_LD | BPF_H | BPF_ABS, 0, 0, 12},
	    {BPF_LD | BPF_B | BPF_ABS, 0, 0, 23},
	    {BPF_LD | BPF_W | BPF_IND, 0, 0, 4},
	    {BPF_LD | BPF_H | BPF_IND, 0, 0, 14},
	    {BPF_LD | BPF_B | BPF_IND, 0, 0, 0},
	    {BPF_LD | BPF_W | BPF_LEN, 0, 0, 0},
	    {BPF_LD | BPF_IMM, 0, 0, 0x12345678},
	    {BPF_LD | BPF_MEM, 0, 0, 3},
	    {BPF_LDX | BPF_W | BPF_IMM, 0, 0, 7},
	    {BPF_LDX | BPF_W | BPF_MEM, 0, 0, 15},
	    {BPF_LDX | BPF_W | BPF_LEN, 0, 0, 0},
	    {BPF_LDX | BPF_B | BPF_MSH, 0, 0, 14},
	    {BPF_ST, 0, 0, 1},
	    {BPF_STX, 0, 0, 2},
	    {BPF_ALU | BPF_ADD | BPF_K, 0, 0, 1},
	    {BPF_ALU | BPF_SUB | BPF_X, 0, 0, 0},
	    {BPF_ALU | BPF_MUL | BPF_K, 0, 0, 3},
	    {BPF_ALU | BPF_DIV | BPF_X, 0, 0, 0},
	    {BPF_ALU | BPF_MOD | BPF_K, 0, 0, 10},
	    {BPF_ALU | BPF_AND | BPF_K, 0, 0, 0x1fff},
	    {BPF_ALU | BPF_OR | BPF_X, 0, 0, 0},
	    {BPF_ALU | BPF_XOR | BPF_K, 0, 0, 0xff},
	    {BPF_ALU | BPF_LSH | BPF_K, 0, 0, 2},
	    {BPF_ALU | BPF_RSH | BPF_X, 0, 0, 0},
	    {BPF_ALU | BPF_NEG, 0, 0, 0},
	    {BPF_JMP | BPF_JA, 0, 0, 0},
	    {BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0x800},
	    {BPF_JMP | BPF_JGT | BPF_X, 1, 0, 0},
	    {BPF_JMP | BPF_JGE | BPF_K, 0, 0, 5},
	    {BPF_JMP | BPF_JSET | BPF_K, 0, 0, 0x1fff},
	    {BPF_MISC | BPF_TAX, 0, 0, 0},
	    {BPF_MISC | BPF_TXA, 0, 0, 0},
	    {BPF_RET | BPF_A, 0, 0, 0},
	    {BPF_RET | BPF_K, 0, 0, 262144},
	    {BPF_RET | BPF_X, 0, 0, 0},
	    {0xffff, 1, 2, 3},
	    {BPF_LD | BPF_W | BPF_ABS, 0, 0, 0xfffff000}, /* a Linux extension offset */
	    {BPF_LD | 0x18 | BPF_ABS, 0, 0, 0},           /* not a load size */
	    {BPF_JMP | 0x60, 0, 0, 0},                    /* not a jump */
	};
	int n = (int)(sizeof insns / sizeof insns[0]);
	for (int i = 0; i < n; i++) {
		char *s = bpf_image(&insns[i], i);
		printf("bpf_image %d: %s\n", i, str(s));
		printf("bpf_validate alone+ret %d: ", i);
		struct bpf_insn two[2] = {insns[i], {BPF_RET | BPF_K, 0, 0, 9}};
		printf("%d\n", bpf_validate(two, 2));
	}
	printf("bpf_validate 0 insns: %d\n", bpf_validate(insns, 0));
	printf("bpf_validate no ret: %d\n", bpf_validate(insns, 3));

	/* Small programs, run on a fixed packet by bpf_filter. */
	u_char pkt[64];
	for (int i = 0; i < 64; i++) pkt[i] = (u_char)(i * 7 + 3);
	struct {
		const char *what;
		struct bpf_insn p[6];
		int n;
	} progs[] = {
	    {"ret k", {{BPF_RET | BPF_K, 0, 0, 77}}, 1},
	    {"ld w abs", {{BPF_LD | BPF_W | BPF_ABS, 0, 0, 10}, {BPF_RET | BPF_A, 0, 0, 0}}, 2},
	    {"ld h abs out", {{BPF_LD | BPF_H | BPF_ABS, 0, 0, 63}, {BPF_RET | BPF_A, 0, 0, 0}}, 2},
	    {"ld b ind", {{BPF_LDX | BPF_IMM, 0, 0, 5}, {BPF_LD | BPF_B | BPF_IND, 0, 0, 2},
			  {BPF_RET | BPF_A, 0, 0, 0}}, 3},
	    {"msh", {{BPF_LDX | BPF_B | BPF_MSH, 0, 0, 1}, {BPF_MISC | BPF_TXA, 0, 0, 0},
		     {BPF_RET | BPF_A, 0, 0, 0}}, 3},
	    {"div by x=0", {{BPF_LD | BPF_IMM, 0, 0, 5}, {BPF_LDX | BPF_IMM, 0, 0, 0},
			    {BPF_ALU | BPF_DIV | BPF_X, 0, 0, 0}, {BPF_RET | BPF_K, 0, 0, 1}}, 4},
	    {"mem", {{BPF_LD | BPF_IMM, 0, 0, 42}, {BPF_ST, 0, 0, 15}, {BPF_LDX | BPF_MEM, 0, 0, 15},
		     {BPF_MISC | BPF_TXA, 0, 0, 0}, {BPF_ALU | BPF_NEG, 0, 0, 0},
		     {BPF_RET | BPF_A, 0, 0, 0}}, 6},
	    {"len", {{BPF_LD | BPF_W | BPF_LEN, 0, 0, 0}, {BPF_RET | BPF_A, 0, 0, 0}}, 2},
	    {"jset", {{BPF_LD | BPF_B | BPF_ABS, 0, 0, 3}, {BPF_JMP | BPF_JSET | BPF_K, 0, 1, 0x10},
		      {BPF_RET | BPF_K, 0, 0, 1}, {BPF_RET | BPF_K, 0, 0, 2}}, 4},
	};
	for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
		printf("bpf_filter '%s': valid=%d wire=%u cut=%u\n", progs[i].what,
		       bpf_validate(progs[i].p, progs[i].n), bpf_filter(progs[i].p, pkt, 1000, 64),
		       bpf_filter(progs[i].p, pkt, 1000, 12));
	}
	/* Compiled programs: only their count and that every image is text
	 * (the instructions are the compiler's choice). */
	pcap_t *p = pcap_open_dead(DLT_EN10MB, 65535);
	for (size_t e = 0; e < NFILTERS; e++) {
		struct bpf_program prog;
		if (pcap_compile(p, &prog, FILTERS[e], 1, PCAP_NETMASK_UNKNOWN) != 0) continue;
		int all_text = 1;
		for (u_int i = 0; i < prog.bf_len; i++) {
			char *s = bpf_image(&prog.bf_insns[i], (int)i);
			all_text &= s != NULL && s[0] != 0;
		}
		printf("images '%s': all_text=%d\n", FILTERS[e], all_text);
		printf("~ images '%s' ~ %u insns\n", FILTERS[e], prog.bf_len);
		pcap_freecode(&prog);
	}
	pcap_close(p);
}

static void dead_handles_and_dumpers(void) {
	pcap_t *p = pcap_open_dead(DLT_EN10MB, 65535);
	header_facts("dead", p);
	pcap_close(p);
	p = pcap_open_dead_with_tstamp_precision(DLT_LINUX_SLL, 1000, PCAP_TSTAMP_PRECISION_NANO);
	header_facts("dead sll nano", p);
	pcap_close(p);
	p = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, 1000, 9);
	printf("dead precision 9: %s\n", p ? "handle" : "NULL");
	if (p) pcap_close(p);
	p = pcap_open_dead(DLT_EN10MB, 0);
	printf("dead snaplen 0: snapshot=%d\n", p ? pcap_snapshot(p) : -99);
	if (p) pcap_close(p);
	p = pcap_open_dead(DLT_EN10MB, -5);
	printf("dead snaplen -5: snapshot=%d\n", p ? pcap_snapshot(p) : -99);
	if (p) pcap_close(p);

	/* Dumpers on dead handles: file header then records written by hand. */
	for (int prec = 0; prec < 2; prec++) {
		p = pcap_open_dead_with_tstamp_precision(DLT_RAW, 1514, (u_int)prec);
		char name[64];
		snprintf(name, sizeof name, "dead-%d.pcap", prec);
		pcap_dumper_t *d = pcap_dump_open(p, name);
		struct pcap_pkthdr h = {{1700000000, 999999}, 20, 40};
		u_char data[20] = {0x45, 0, 0, 40};
		for (int i = 0; i < 3; i++) {
			h.ts.tv_sec += i;
			pcap_dump((u_char *)d, &h, data);
			printf("dead dump %d: ftell=%ld\n", i, pcap_dump_ftell(d));
		}
		pcap_dump_close(d);
		/* Append: same precision, then through a FILE*. */
		d = pcap_dump_open_append(p, name);
		printf("append same: %s\n", d ? "ok" : pcap_geterr(p));
		if (d) {
			pcap_dump((u_char *)d, &h, data);
			printf("append ftell=%ld\n", pcap_dump_ftell(d));
			pcap_dump_close(d);
		}
		pcap_close(p);
		/* Append with the other precision or another link type. */
		p = pcap_open_dead_with_tstamp_precision(DLT_RAW, 1514, (u_int)!prec);
		d = pcap_dump_open_append(p, name);
		printf("append other precision: %s\n", d ? "ok" : pcap_geterr(p));
		if (d) pcap_dump_close(d);
		pcap_close(p);
		p = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, 1514, (u_int)prec);
		d = pcap_dump_open_append(p, name);
		printf("append other linktype: %s\n", d ? "ok" : pcap_geterr(p));
		if (d) pcap_dump_close(d);
		pcap_close(p);
	}
	p = pcap_open_dead(DLT_EN10MB, 65535);
	pcap_dumper_t *d = pcap_dump_open_append(p, "append-new.pcap");
	printf("append new file: %s\n", d ? "ok" : pcap_geterr(p));
	if (d) pcap_dump_close(d);
	d = pcap_dump_open_append(p, "text.txt");
	printf("append to text: %s\n", d ? "ok" : pcap_geterr(p));
	if (d) pcap_dump_close(d);
	d = pcap_dump_open_append(p, "empty.bin");
	printf("append to empty: %s\n", d ? "ok" : pcap_geterr(p));
	if (d) pcap_dump_close(d);
	d = pcap_dump_open_append(p, "shb-only.pcapng");
	printf("append to pcapng: %s\n", d ? "ok" : pcap_geterr(p));
	if (d) pcap_dump_close(d);
	d = pcap_dump_open(p, "no-such-dir/x.pcap");
	printf("dump_open bad dir: %s\n", d ? "ok" : pcap_geterr(p));
	if (d) pcap_dump_close(d);
	FILE *f = fopen("fopen-dump.pcap", "wb");
	d = pcap_dump_fopen(p, f);
	printf("dump_fopen: %s file_is_f=%d\n", d ? "ok" : pcap_geterr(p),
	       d ? pcap_dump_file(d) == f : -1);
	if (d) {
		struct pcap_pkthdr h = {{5, 6}, 3, 3};
		pcap_dump((u_char *)d, &h, (const u_char *)"abc");
		printf("dump_fopen flush=%d ftell=%ld\n", pcap_dump_flush(d), pcap_dump_ftell(d));
		pcap_dump_close(d);
	}
	pcap_close(p);
}

static void names(void) {
	for (int dlt = 0; dlt <= 300; dlt++) {
		const char *n = pcap_datalink_val_to_name(dlt);
		printf("dlt %d: name=%s desc=%s or_dlt=%s back=%d\n", dlt, str(n),
		       str(pcap_datalink_val_to_description(dlt)),
		       str(pcap_datalink_val_to_description_or_dlt(dlt)),
		       n ? pcap_datalink_name_to_val(n) : -99);
	}
	const char *odd[] = {"EN10MB", "en10mb", "DLT_EN10MB", "ieee802_11_radio", "foo", "",
			     "linux_sll2", "RAW", "IPV4", "null"};
	for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
		printf("name_to_val '%s': %d\n", odd[i], pcap_datalink_name_to_val(odd[i]));
	for (int v = -2; v <= 7; v++)
		printf("tstamp %d: name=%s desc=%s\n", v, str(pcap_tstamp_type_val_to_name(v)),
		       str(pcap_tstamp_type_val_to_description(v)));
	const char *tn[] = {"host", "host_lowprec", "host_hiprec", "adapter", "adapter_unsynced",
			    "host_hiprec_unsynced", "HOST", "foo", ""};
	for (size_t i = 0; i < sizeof tn / sizeof tn[0]; i++)
		printf("tstamp name '%s': %d\n", tn[i], pcap_tstamp_type_name_to_val(tn[i]));
	for (int s = -14; s <= 4; s++) printf("statustostr %d: %s\n", s, pcap_statustostr(s));
	int errs[] = {0, EPERM, ENOENT, EACCES, EINVAL, ENODEV, 9999};
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
		printf("strerror %d: %s\n", errs[i], pcap_strerror(errs[i]));
	printf("~ lib_version ~ %s\n", pcap_lib_version());
	printf("lib_version starts: %d\n", strncmp(pcap_lib_version(), "libpcap version ", 16) == 0);
}

/* Calls on an offline handle that only make sense live, and others. */
static void offline_handle(const char *dir) {
	char path[4096];
	snprintf(path, sizeof path, "%s/802.1ad_QinQ.pcap", dir);
	pcap_t *p = opened("open", pcap_open_offline(path, errbuf));
	if (!p) return;
	printf("geterr fresh: '%s'\n", pcap_geterr(p));
	int *dlts = NULL;
	int n = pcap_list_datalinks(p, &dlts);
	printf("list_datalinks: %d", n);
	for (int i = 0; i < n; i++) printf(" %d", dlts[i]);
	printf("\n");
	if (n > 0) pcap_free_datalinks(dlts);
	printf("set_datalink 1: %d\n", pcap_set_datalink(p, 1));
	int r = pcap_set_datalink(p, DLT_IEEE802_11);
	printf("set_datalink 105: %d err=%s\n", r, r ? pcap_geterr(p) : "");
	r = pcap_set_datalink(p, 299);
	printf("set_datalink 299: %d err=%s\n", r, r ? pcap_geterr(p) : "");
	int *types = NULL;
	n = pcap_list_tstamp_types(p, &types);
	printf("list_tstamp_types: %d", n);
	for (int i = 0; i < n; i++) printf(" %d", types[i]);
	printf("\n");
	if (n > 0) pcap_free_tstamp_types(types);
	struct pcap_stat st;
	r = pcap_stats(p, &st);
	printf("stats: %d err=%s\n", r, r ? pcap_geterr(p) : "");
	fflush(stdout);
	pcap_perror(p, "perror-prefix");
	fflush(stderr);
	r = pcap_setdirection(p, PCAP_D_IN);
	printf("setdirection: %d err=%s\n", r, r ? pcap_geterr(p) : "");
	r = pcap_sendpacket(p, (const u_char *)"0123456789abcdef", 16);
	printf("sendpacket: %d err=%s\n", r, r ? pcap_geterr(p) : "");
	r = pcap_inject(p, "0123456789abcdef", 16);
	printf("inject: %d err=%s\n", r, r ? pcap_geterr(p) : "");
	printf("getnonblock: %d\n", pcap_getnonblock(p, errbuf));
	printf("setnonblock 1: %d\n", pcap_setnonblock(p, 1, errbuf));
	printf("getnonblock: %d\n", pcap_getnonblock(p, errbuf));
	printf("~ selectable_fd ~ %d\n", pcap_get_selectable_fd(p));
	printf("~ fileno ~ %d\n", pcap_fileno(p));
	printf("selectable_fd ok: %d fileno ok: %d\n", pcap_get_selectable_fd(p) >= 0,
	       pcap_fileno(p) >= 0);
	r = pcap_set_snaplen(p, 100);
	printf("set_snaplen on activated: %d err=%s\n", r, r ? pcap_geterr(p) : "");
	printf("set_promisc on activated: %d\n", pcap_set_promisc(p, 1));
	printf("set_timeout on activated: %d\n", pcap_set_timeout(p, 1));
	printf("set_buffer_size on activated: %d\n", pcap_set_buffer_size(p, 1 << 20));
	printf("set_tstamp_precision on activated: %d\n", pcap_set_tstamp_precision(p, 1));
	printf("activate on activated: %d\n", pcap_activate(p));
	printf("can_set_rfmon on activated: %d\n", pcap_can_set_rfmon(p));
	printf("datalink_ext: %d\n", pcap_datalink_ext(p));
	pcap_close(p);

	/* A handle that is never activated: a device that does not exist. */
	p = pcap_create("nosuchdev0", errbuf);
	printf("create: %s\n", p ? "ok" : errbuf);
	if (p) {
		printf("not activated: datalink=%d snapshot=%d\n", pcap_datalink(p), pcap_snapshot(p));
		printf("set_snaplen=%d set_promisc=%d set_timeout=%d set_immediate=%d\n",
		       pcap_set_snaplen(p, 200), pcap_set_promisc(p, 1), pcap_set_timeout(p, 100),
		       pcap_set_immediate_mode(p, 1));
		printf("set_tstamp_precision nano=%d 5=%d get=%d\n",
		       pcap_set_tstamp_precision(p, PCAP_TSTAMP_PRECISION_NANO),
		       pcap_set_tstamp_precision(p, 5), pcap_get_tstamp_precision(p));
		printf("set_tstamp_type adapter=%d\n", pcap_set_tstamp_type(p, PCAP_TSTAMP_ADAPTER));
		r = pcap_stats(p, &st);
		printf("stats not activated: %d err=%s\n", r, r ? pcap_geterr(p) : "");
		r = pcap_activate(p);
		printf("activate: %d err=%s\n", r, pcap_geterr(p));
		pcap_close(p);
	}
	p = pcap_open_live("nosuchdev0", 100, 0, 10, errbuf);
	printf("open_live nosuchdev0: %s\n", p ? "ok" : errbuf);
	if (p) pcap_close(p);
	bpf_u_int32 net, mask;
	r = pcap_lookupnet("nosuchdev0", &net, &mask, errbuf);
	printf("lookupnet nosuchdev0: %d err=%s\n", r, r ? errbuf : "");
	/* The machine's devices: the same on both runs, one after the other. */
	char *dev = pcap_lookupdev(errbuf);
	printf("lookupdev: %s\n", dev ? dev : errbuf);
	pcap_if_t *devs = NULL;
	r = pcap_findalldevs(&devs, errbuf);
	printf("findalldevs: %d\n", r);
	/* Network interfaces and "any" exactly; libpcap's other sources
	 * (bluetooth-monitor, nflog, nfqueue, dbus-*) only by name, on one
	 * loose line: a library need not offer them. */
	char others[2048] = "";
	for (pcap_if_t *d = devs; d; d = d->next) {
		char sys[512];
		snprintf(sys, sizeof sys, "/sys/class/net/%s", d->name);
		struct stat st;
		if (strcmp(d->name, "any") != 0 && stat(sys, &st) != 0) {
			if (strlen(others) + strlen(d->name) + 2 < sizeof others) {
				strcat(others, " ");
				strcat(others, d->name);
			}
			continue;
		}
		printf("  dev %s desc=%s flags=0x%x addrs:", d->name, str(d->description), d->flags);
		for (pcap_addr_t *a = d->addresses; a; a = a->next)
			printf(" %d/%d/%d/%d", a->addr ? a->addr->sa_family : -1,
			       a->netmask ? a->netmask->sa_family : -1,
			       a->broadaddr ? a->broadaddr->sa_family : -1,
			       a->dstaddr ? a->dstaddr->sa_family : -1);
		printf("\n");
	}
	printf("~ other sources ~%s\n", others);
	if (r == 0) pcap_freealldevs(devs);
	r = pcap_init(99, errbuf);
	printf("init 99: %d err=%s\n", r, r ? errbuf : "");
	r = pcap_init(PCAP_CHAR_ENC_LOCAL, errbuf);
	printf("init local: %d\n", r);
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: api SCRATCH_DIR CORPUS_PCAPS_DIR\n");
		return 2;
	}
	if (chdir(argv[1]) != 0) {
		perror(argv[1]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	names();
	instructions();
	open_errors();
	compile_errors();
	dead_handles_and_dumpers();
	offline_handle(argv[2]);
	every_capture(argv[2]);
	printf("done\n");
	return 0;
}
