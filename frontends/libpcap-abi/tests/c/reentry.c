/*
 * What programs do to libpcap besides reading packets in order, printed as
 * a transcript that must be the same on every libpcap (tests/reentry.rs
 * runs it on sluice's and on Debian's):
 *
 *   reentry callback CAPTURE   every accessor, pcap_setfilter,
 *                              pcap_next_ex, pcap_stats, pcap_compile,
 *                              pcap_breakloop from inside a callback
 *   reentry cancel CAPTURE     pthread_cancel of a thread in pcap_loop on
 *                              a pipe (waiting, and inside its callback),
 *                              pthread_exit from a callback; the handle
 *                              is closed afterwards
 *   reentry stdio CAPTURE OUT  ftell/fseek of pcap_file()'s stream,
 *                              pcap_fopen_offline, "-" after fread+rewind
 *                              of stdin (stdin is CAPTURE), pcap_dump_*
 *                              positions and pcap_dump_fopen
 *   reentry pipe CAPTURE       a slow writer: each record must be handed
 *                              over before the next one is written
 *   reentry filters CAPTURE    bpf_filter and pcap_offline_filter verdicts
 *                              of compiled programs, of one array changed
 *                              in place between calls, of a hand-made
 *                              program with unreachable instructions
 *   reentry snaplen            pcap_compile on dead handles of snapshot
 *                              lengths 0, -1, 1: 0 rejects all packets
 *   reentry twice              pcap_close twice, with a new handle at the
 *                              same address in between
 *   reentry closecb CAPTURE    pcap_close from inside the loop's callback
 *
 * The last two crash or corrupt memory on libpcap: they run on sluice's
 * library only.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pcap/pcap.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char errbuf[PCAP_ERRBUF_SIZE];

static pcap_t *open_or_die(const char *f) {
    pcap_t *p = pcap_open_offline(f, errbuf);
    if (!p) {
        printf("open %s: %s\n", f, errbuf);
        exit(1);
    }
    return p;
}

/* ---- callback ---- */

struct cb_state {
    pcap_t *p;
    int n;
};

static void accessors(u_char *user, const struct pcap_pkthdr *h, const u_char *bytes) {
    struct cb_state *s = (struct cb_state *)user;
    pcap_t *p = s->p;
    s->n++;
    FILE *f = pcap_file(p);
    struct pcap_stat st;
    int stats = pcap_stats(p, &st);
    printf("pkt %d len %u caplen %u first %02x file %s at %ld fileno %d selectable %s "
           "dlt %d ext %d snap %d swapped %d version %d.%d stats %d (%s) bufsize %d\n",
           s->n, h->len, h->caplen, h->caplen ? bytes[0] : 0, f ? "yes" : "NULL",
           f ? ftell(f) : -1L, pcap_fileno(p),
           f && pcap_get_selectable_fd(p) == fileno(f) ? "= fileno(file)" : "other",
           pcap_datalink(p), pcap_datalink_ext(p), pcap_snapshot(p), pcap_is_swapped(p),
           pcap_major_version(p), pcap_minor_version(p), stats, stats ? pcap_geterr(p) : "",
           pcap_bufsize(p));
    int *dlts = NULL;
    int nd = pcap_list_datalinks(p, &dlts);
    printf("  datalinks %d first %d\n", nd, nd > 0 ? dlts[0] : -1);
    pcap_free_datalinks(dlts);
    if (s->n == 2) {
        struct bpf_program prog;
        int c = pcap_compile(p, &prog, "tcp", 1, PCAP_NETMASK_UNKNOWN);
        int sf = c == 0 ? pcap_setfilter(p, &prog) : -9;
        printf("  compile %d setfilter %d\n", c, sf);
        if (c == 0)
            pcap_freecode(&prog);
        c = pcap_compile(p, &prog, "tcp port", 1, PCAP_NETMASK_UNKNOWN);
        printf("  bad compile %d: %s\n", c, pcap_geterr(p));
    }
    if (s->n == 4) {
        struct pcap_pkthdr *nh;
        const u_char *nd2;
        int r = pcap_next_ex(p, &nh, &nd2);
        printf("  next_ex %d len %u at %ld\n", r, r == 1 ? nh->len : 0, f ? ftell(f) : -1L);
    }
    if (s->n == 6) {
        pcap_breakloop(p);
        printf("  breakloop\n");
    }
}

static int cmd_callback(const char *cap) {
    pcap_t *p = open_or_die(cap);
    struct cb_state s = {p, 0};
    int r = pcap_loop(p, -1, accessors, (u_char *)&s);
    printf("loop returned %d after %d\n", r, s.n);
    r = pcap_dispatch(p, 3, accessors, (u_char *)&s);
    printf("dispatch returned %d after %d\n", r, s.n);
    struct pcap_pkthdr *h;
    const u_char *d;
    r = pcap_next_ex(p, &h, &d);
    printf("next_ex %d\n", r);
    /* A filter that keeps nothing, set from the callback of the loop. */
    r = pcap_loop(p, -1, accessors, (u_char *)&s);
    printf("loop returned %d after %d\n", r, s.n);
    r = pcap_next_ex(p, &h, &d);
    printf("next_ex at end %d\n", r);
    pcap_close(p);
    return 0;
}

/* ---- cancel ---- */

struct writer {
    int fd;
    const char *cap;
    int records; /* how many records to write, then stay open */
};

/* Writes the capture's header and its first `records` records to fd,
 * then waits (the pipe stays open) until killed. */
static void write_records(int fd, const char *cap, int records) {
    FILE *in = fopen(cap, "rb");
    unsigned char buf[65536 + 16];
    if (!in || fread(buf, 1, 24, in) != 24)
        _exit(2);
    if (write(fd, buf, 24) != 24)
        _exit(2);
    for (int i = 0; i < records; i++) {
        if (fread(buf, 1, 16, in) != 16)
            break;
        unsigned int caplen;
        memcpy(&caplen, buf + 8, 4);
        if (caplen > 65536 || fread(buf + 16, 1, caplen, in) != caplen)
            break;
        if (write(fd, buf, 16 + caplen) != (ssize_t)(16 + caplen))
            _exit(2);
    }
    fclose(in);
}

static pid_t spawn_writer(const char *cap, int records, int *rfd) {
    int fds[2];
    if (pipe(fds))
        exit(3);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        write_records(fds[1], cap, records);
        for (;;)
            pause();
    }
    close(fds[1]);
    *rfd = fds[0];
    return pid;
}

static volatile int cb_seen;
static volatile int cleanup_ran;

static void cleanup(void *arg) {
    (void)arg;
    cleanup_ran = 1;
}

static void count_cb(u_char *user, const struct pcap_pkthdr *h, const u_char *b) {
    (void)user, (void)h, (void)b;
    cb_seen++;
}

static void sleepy_cb(u_char *user, const struct pcap_pkthdr *h, const u_char *b) {
    (void)user, (void)h, (void)b;
    cb_seen++;
    if (cb_seen == 2)
        sleep(30); /* a cancellation point */
}

static void exit_cb(u_char *user, const struct pcap_pkthdr *h, const u_char *b) {
    (void)user, (void)h, (void)b;
    cb_seen++;
    if (cb_seen == 2)
        pthread_exit((void *)42);
}

struct loop_arg {
    pcap_t *p;
    pcap_handler cb;
};

static void *loop_thread(void *a) {
    struct loop_arg *la = a;
    pthread_cleanup_push(cleanup, NULL);
    pcap_loop(la->p, -1, la->cb, NULL);
    pthread_cleanup_pop(0);
    return (void *)7;
}

static void wait_for(int n) {
    for (int i = 0; i < 500 && cb_seen < n; i++)
        usleep(10000);
}

static int cancel_case(const char *what, const char *cap, pcap_handler cb, int cancel) {
    int rfd;
    pid_t w = spawn_writer(cap, 3, &rfd);
    FILE *f = fdopen(rfd, "rb");
    pcap_t *p = pcap_fopen_offline(f, errbuf);
    if (!p) {
        printf("%s: fopen_offline: %s\n", what, errbuf);
        return 1;
    }
    cb_seen = 0;
    cleanup_ran = 0;
    pthread_t t;
    struct loop_arg la = {p, cb};
    pthread_create(&t, NULL, loop_thread, &la);
    /* All three records arrive; the loop then waits on the pipe (or
     * sleeps in its callback). */
    wait_for(cb == sleepy_cb ? 2 : 3);
    usleep(100000);
    if (cancel)
        pthread_cancel(t);
    void *rv;
    pthread_join(t, &rv);
    printf("%s: callbacks %d, cleanup handler %s, thread returned %s\n", what, cb_seen,
           cleanup_ran ? "ran" : "did not run",
           rv == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : rv == (void *)42 ? "42" : "other");
    /* The handle is still usable and closable. */
    printf("%s: datalink %d snapshot %d\n", what, pcap_datalink(p), pcap_snapshot(p));
    pcap_close(p);
    printf("%s: closed\n", what);
    kill(w, SIGKILL);
    waitpid(w, NULL, 0);
    return 0;
}

static int cmd_cancel(const char *cap) {
    cancel_case("cancel while waiting", cap, count_cb, 1);
    cancel_case("cancel in callback", cap, sleepy_cb, 1);
    cancel_case("pthread_exit in callback", cap, exit_cb, 0);
    return 0;
}

/* ---- stdio ---- */

static int cmd_stdio(const char *cap, const char *out) {
    /* Positions after each record, and fseek back. */
    pcap_t *p = open_or_die(cap);
    FILE *f = pcap_file(p);
    printf("after open: at %ld\n", ftell(f));
    struct pcap_pkthdr *h;
    const u_char *d;
    long second = -1;
    for (int i = 0; i < 4 && pcap_next_ex(p, &h, &d) == 1; i++) {
        printf("record %d len %u: at %ld\n", i, h->len, ftell(f));
        if (i == 0)
            second = ftell(f);
    }
    if (fseek(f, second, SEEK_SET) == 0 && pcap_next_ex(p, &h, &d) == 1)
        printf("after fseek to %ld: len %u, at %ld\n", second, h->len, ftell(f));
    fseek(f, 0, SEEK_END);
    printf("at the end: next_ex %d\n", pcap_next_ex(p, &h, &d));
    fseek(f, second, SEEK_SET);
    printf("moved back: next_ex %d\n", pcap_next_ex(p, &h, &d));
    pcap_close(p);

    /* pcap_fopen_offline: the stream is read from where it is. */
    f = fopen(cap, "rb");
    p = pcap_fopen_offline(f, errbuf);
    printf("fopen_offline: %s, file is ours %d\n", p ? "ok" : errbuf, p && pcap_file(p) == f);
    int n = 0;
    while (p && pcap_next_ex(p, &h, &d) == 1 && n < 2)
        n++;
    printf("two records read: at %ld\n", ftell(f));
    pcap_close(p);

    /* What tcptrace does: probe stdin, rewind, then "-". */
    unsigned char probe[64];
    size_t got = fread(probe, 1, sizeof probe, stdin);
    rewind(stdin);
    p = pcap_open_offline("-", errbuf);
    n = 0;
    while (p && pcap_next_ex(p, &h, &d) == 1)
        n++;
    printf("stdin after probing %zu bytes: %s, %d packets, file is stdin %d\n", got,
           p ? "ok" : errbuf, n, p && pcap_file(p) == stdin);
    if (p)
        pcap_close(p);

    /* Dump positions, pcap_dump_file, pcap_dump_fopen after a prefix. */
    p = open_or_die(cap);
    char path[4096];
    snprintf(path, sizeof path, "%s/dump.pcap", out);
    pcap_dumper_t *dd = pcap_dump_open(p, path);
    printf("dump_open: ftell %ld, file %s\n", pcap_dump_ftell(dd),
           pcap_dump_file(dd) ? "yes" : "NULL");
    for (int i = 0; i < 3 && pcap_next_ex(p, &h, &d) == 1; i++) {
        pcap_dump((u_char *)dd, h, d);
        printf("dumped %d: ftell %ld\n", i, pcap_dump_ftell(dd));
    }
    printf("flush %d\n", pcap_dump_flush(dd));
    pcap_dump_close(dd);
    snprintf(path, sizeof path, "%s/fopen.pcap", out);
    FILE *w = fopen(path, "wb");
    fputs("PREFIX--", w);
    dd = pcap_dump_fopen(p, w);
    printf("dump_fopen after 8 bytes: ftell %ld, same stream %d\n", pcap_dump_ftell(dd),
           pcap_dump_file(dd) == w);
    if (pcap_next_ex(p, &h, &d) == 1)
        pcap_dump((u_char *)dd, h, d);
    printf("one more: ftell %ld\n", pcap_dump_ftell(dd));
    pcap_dump_close(dd);
    pcap_close(p);
    return 0;
}

/* ---- pipe ---- */

static int cmd_pipe(const char *cap) {
    int data[2], ack[2];
    if (pipe(data) || pipe(ack))
        return 3;
    pid_t pid = fork();
    if (pid == 0) {
        /* The writer: the header, then one record at a time, each only
         * after the reader said it got the one before (or after 3 s). */
        close(data[0]);
        close(ack[1]);
        FILE *in = fopen(cap, "rb");
        unsigned char buf[65536 + 16];
        if (!in || fread(buf, 1, 24, in) != 24 || write(data[1], buf, 24) != 24)
            _exit(2);
        for (int i = 0; i < 5; i++) {
            if (fread(buf, 1, 16, in) != 16)
                break;
            unsigned int caplen;
            memcpy(&caplen, buf + 8, 4);
            if (caplen > 65536 || fread(buf + 16, 1, caplen, in) != caplen)
                break;
            if (write(data[1], buf, 16 + caplen) < 0)
                _exit(2);
            struct pollfd pfd = {ack[0], POLLIN, 0};
            char c;
            if (poll(&pfd, 1, 3000) == 1 && read(ack[0], &c, 1) == 1)
                continue;
        }
        _exit(0);
    }
    close(data[1]);
    close(ack[0]);
    FILE *f = fdopen(data[0], "rb");
    pcap_t *p = pcap_fopen_offline(f, errbuf);
    if (!p) {
        printf("fopen_offline: %s\n", errbuf);
        return 1;
    }
    struct pcap_pkthdr *h;
    const u_char *d;
    for (int i = 0;; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int r = pcap_next_ex(p, &h, &d);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double waited = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
        if (r != 1) {
            printf("next_ex %d\n", r);
            break;
        }
        printf("record %d len %u: %s\n", i, h->len,
               waited < 2.0 ? "as soon as it was written" : "late");
        if (write(ack[1], "k", 1) != 1)
            break;
    }
    pcap_close(p);
    waitpid(pid, NULL, 0);
    return 0;
}

/* ---- filters ---- */

static int cmd_filters(const char *cap) {
    const char *exprs[] = {"tcp port 80", "ip6 and not icmp6", "udp or arp", "tcp[13] & 2 != 0",
                           "ip[0] & 0xf > 5", "len > 100", ""};
    pcap_t *dead = pcap_open_dead(DLT_EN10MB, 262144);
    /* One array, rewritten in place with each program in turn. */
    struct bpf_insn *shared = calloc(4096, sizeof *shared);
    for (size_t e = 0; e < sizeof exprs / sizeof *exprs; e++) {
        struct bpf_program prog;
        if (pcap_compile(dead, &prog, exprs[e], 1, PCAP_NETMASK_UNKNOWN)) {
            printf("%s: %s\n", exprs[e], pcap_geterr(dead));
            continue;
        }
        memcpy(shared, prog.bf_insns, prog.bf_len * sizeof *shared);
        struct bpf_program in_place = {prog.bf_len, shared};
        pcap_t *p = open_or_die(cap);
        struct pcap_pkthdr *h;
        const u_char *d;
        unsigned long acc[3] = {0, 0, 0}, value = 0;
        while (pcap_next_ex(p, &h, &d) == 1) {
            u_int a = bpf_filter(prog.bf_insns, d, h->len, h->caplen);
            int b = pcap_offline_filter(&prog, h, d);
            u_int c = bpf_filter(shared, d, h->len, h->caplen);
            int c2 = pcap_offline_filter(&in_place, h, d);
            /* A truncated copy: only the first 14 bytes captured. */
            u_int t = bpf_filter(prog.bf_insns, d, h->len, h->caplen < 14 ? h->caplen : 14);
            acc[0] += a != 0;
            acc[1] += t != 0;
            acc[2] += (a != 0) + (b != 0) + (c != 0) + (c2 != 0);
            if (a)
                value = a;
        }
        printf("'%s': accepted %lu (value %lu), %lu on 14 bytes, all four agree %s\n", exprs[e],
               acc[0], value, acc[1], acc[2] == 4 * acc[0] ? "yes" : "no");
        pcap_close(p);
        pcap_freecode(&prog);
    }
    /* Unreachable instructions between reachable ones (a hole). */
    struct bpf_insn holed[] = {
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x0800, 1, 2),
        BPF_STMT(BPF_RET | BPF_K, 1),
        BPF_STMT(BPF_RET | BPF_K, 65535),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    holed[2].code = 0xffff; /* never reached: not an instruction at all */
    pcap_t *p = open_or_die(cap);
    struct pcap_pkthdr *h;
    const u_char *d;
    unsigned long ipv4 = 0, n = 0;
    while (pcap_next_ex(p, &h, &d) == 1) {
        n++;
        ipv4 += bpf_filter(holed, d, h->len, h->caplen) == 65535;
    }
    printf("hand-made program with a hole: %lu of %lu are IPv4\n", ipv4, n);
    pcap_close(p);
    printf("NULL program: %u\n", bpf_filter(NULL, NULL, 0, 0));
    pcap_close(dead);
    free(shared);
    return 0;
}

/* ---- snaplen ---- */

static int cmd_snaplen(void) {
    int lens[] = {0, -1, 1, 65535};
    for (int i = 0; i < 4; i++) {
        pcap_t *p = pcap_open_dead(DLT_EN10MB, lens[i]);
        struct bpf_program f;
        int r = pcap_compile(p, &f, "tcp", 1, PCAP_NETMASK_UNKNOWN);
        printf("snaplen %d: compile %d %s\n", lens[i], r, r ? pcap_geterr(p) : "");
        if (r == 0)
            pcap_freecode(&f);
        r = pcap_compile(p, &f, "", 1, PCAP_NETMASK_UNKNOWN);
        printf("  empty expression: %d %s\n", r, r ? pcap_geterr(p) : "");
        if (r == 0)
            pcap_freecode(&f);
        pcap_close(p);
    }
    return 0;
}

/* ---- twice ---- */

static int cmd_twice(void) {
    pcap_t *a = pcap_open_dead(DLT_EN10MB, 65535);
    pcap_close(a);
    /* Allocators reuse the address at once; libpcap would now close b. */
    pcap_t *b = pcap_open_dead(DLT_RAW, 1500);
    pcap_close(a);
    printf("after a second close of the first: b's datalink %d\n", pcap_datalink(b));
    pcap_close(b);
    return 0;
}

static void close_cb(u_char *user, const struct pcap_pkthdr *h, const u_char *b) {
    (void)h, (void)b;
    pcap_close((pcap_t *)user);
}

static int cmd_closecb(const char *cap) {
    pcap_t *p = open_or_die(cap);
    int r = pcap_loop(p, -1, close_cb, (u_char *)p);
    printf("loop returned %d\n", r);
    pcap_close(p);
    printf("second close ignored\n");
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc >= 3 && !strcmp(argv[1], "callback"))
        return cmd_callback(argv[2]);
    if (argc >= 3 && !strcmp(argv[1], "cancel"))
        return cmd_cancel(argv[2]);
    if (argc >= 4 && !strcmp(argv[1], "stdio"))
        return cmd_stdio(argv[2], argv[3]);
    if (argc >= 3 && !strcmp(argv[1], "pipe"))
        return cmd_pipe(argv[2]);
    if (argc >= 3 && !strcmp(argv[1], "filters"))
        return cmd_filters(argv[2]);
    if (argc >= 2 && !strcmp(argv[1], "snaplen"))
        return cmd_snaplen();
    if (argc >= 2 && !strcmp(argv[1], "twice"))
        return cmd_twice();
    if (argc >= 3 && !strcmp(argv[1], "closecb"))
        return cmd_closecb(argv[2]);
    fprintf(stderr, "usage: reentry callback|cancel|stdio|pipe|twice ...\n");
    return 2;
}
