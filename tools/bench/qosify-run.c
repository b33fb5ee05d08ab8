// Benchmark harness for the peer, OpenWrt qosify's tc classifier (qosify-bpf.c,
// compiled by tools/bench/ebpf-qosify from QOSIFY_DIR), run in the kernel
// through BPF_PROG_TEST_RUN on the frames qosmap-bench-ebpf uses, over the
// empty program (tools/bench/bpf-null.bpf.c) measured in the same round.
// qosify-bpf.h comes from QOSIFY_DIR at build time (cc -I"$QOSIFY_DIR"): no
// qosify code is kept here, only the values its daemon would write.
//
// Maps as qosify's daemon fills them (map.c, ubus.c) for OpenWrt's stock
// /etc/config/qosify and /etc/qosify/00-defaults.conf:
//   classes (slots in config order): besteffort CS0, bulk LE, video AF41,
//     voice CS6 with bulk_trigger_pps 100, bulk_trigger_timeout 5,
//     dscp_bulk CS0; a class's unset dscp_prio/dscp_bulk are 0xff.
//   defaults: dscp_icmp +besteffort, dscp_default_udp besteffort (every UDP
//     port not in a file maps to that class), dscp_prio video,
//     prio_max_avg_pkt_len 500 (the global flow config, which qosify copies
//     only into the TCP default slot: dscp_default_tcp unset is DSCP 0).
//   files: tcp:53, tcp:5353, udp:53, udp:5353, udp:123 voice; tcp:22 +video;
//     tcp/udp:80, tcp/udp:443 +besteffort.
// For this bench, tcp:10350 and udp:10350 (qosmap-bench-ebpf's port rule hit)
// map to a fifth class, "bench": voice's flow settings with DSCP EF instead of
// CS6. qosify rewrites a class DSCP whose bit 4 is set (CS6 is 48) only if the
// packet's ECN bits are 0 (IPv4) and never on a little-endian machine (IPv6):
// the ECN test of its non-forced rewrite, and the "fallback" flag test applied
// after the shift. Measured here: CS6 left an ECT(1) IPv4 frame and any IPv6
// frame at DSCP 0. EF (46) takes the forced rewrite in both families, so the
// frames can be qosmap-bench-ebpf's (ECT(1)) with DSCP 0, and the check can
// see the class's DSCP.
// Cases (egress, qosify's default direction; frames to port 10350 or 9):
//   a. port-map hit, bulk detection off: bench with bulk_trigger_pps 0 (and
//      prio_max_avg_pkt_len 0), which check_flow() reads as "no flow check".
//   b. port-map hit, stock bulk detection: bench with voice's stock
//      bulk_trigger_pps 100, bulk_trigger_timeout 5, dscp_bulk CS0. BPF_PROG_TEST_RUN
//      repeats one flow at line rate, so after its first 100 packets the flow
//      is bulk and stays so: the steady state is a bulk flow (DSCP CS0).
//   c. no port-map hit, stock: port 9, the UDP default class besteffort.
// The runs of one BPF_PROG_TEST_RUN share one skb: the first rewrites the
// DSCP, the others find it already set (qosify's value is fixed per class).
// Checks (exit 1 on failure): each timed run returns TC_ACT_UNSPEC; a leaves
// with EF and counts every packet in bench; b's first packet of a new flow
// leaves with EF and a timed run with CS0 (bulk), counted in bench; c leaves
// with DSCP 0, counted in besteffort, none in bench.
// Usage: qosify-run QOSIFY_OBJECT NULL_OBJECT REPEAT ROUNDS
#include <stdbool.h>
#include <stdint.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qosify-bpf.h"

enum { CS0 = 0, LE = 1, AF41 = 34, EF = 46, CS6 = 48, UNSET = 0xff };
enum { BESTEFFORT, BULK, VIDEO, VOICE, BENCH };  // slots, in the config's order
enum { PORT_HIT = 10350, PORT_MISS = 9 };

static int class_fd, flow_fd;

static void fail(const char *what) {
    fprintf(stderr, "qosify-run: CHECK FAILED: %s\n", what);
    exit(1);
}

static int map_fd(struct bpf_object *obj, const char *name) {
    int fd = bpf_object__find_map_fd_by_name(obj, name);
    if (fd < 0) { fprintf(stderr, "qosify-run: no map %s\n", name); exit(1); }
    return fd;
}

// Writes a class as qosify_map_set_classes() does; this also zeroes its counters.
static void set_class(uint32_t slot, uint8_t dscp, uint8_t flags, uint16_t pps, uint8_t timeout,
                      uint8_t bulk, uint8_t prio, uint16_t prio_len) {
    struct qosify_class c;
    memset(&c, 0, sizeof(c));
    c.config.dscp_prio = prio;
    c.config.dscp_bulk = bulk;
    c.config.bulk_trigger_timeout = timeout;
    c.config.bulk_trigger_pps = pps;
    c.config.prio_max_avg_pkt_len = prio_len;
    c.val.ingress = c.val.egress = dscp;
    c.flags = flags;
    if (bpf_map_update_elem(class_fd, &slot, &c, BPF_ANY)) fail("class_map update");
}

static void set_bench(bool bulk_detection) {
    set_class(BENCH, EF, QOSIFY_CLASS_FLAG_PRESENT, bulk_detection ? 100 : 0, bulk_detection ? 5 : 0,
              CS0, UNSET, 0);
}

static uint64_t class_packets(uint32_t slot) {
    struct qosify_class c;
    if (bpf_map_lookup_elem(class_fd, &slot, &c)) fail("class_map lookup");
    return c.packets;
}

static void forget_flows(void) {
    uint32_t key;
    while (bpf_map_get_next_key(flow_fd, NULL, &key) == 0) bpf_map_delete_elem(flow_fd, &key);
}

// qosmap-bench-ebpf's frame (same addresses, ports, lengths, ECT(1)), DSCP 0.
static int frame(uint8_t *f, int v6, uint16_t port) {
    memset(f, 0, 128);
    uint8_t mac[12] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1};
    memcpy(f, mac, 12);
    f[12] = v6 ? 0x86 : 0x08;
    f[13] = v6 ? 0xdd : 0x00;
    uint8_t *h = f + 14;
    int l3;
    if (v6) {
        h[0] = 0x60;
        h[1] = 0x10;  // ECT(1)
        h[5] = 40;  // payload length
        h[6] = 17;
        h[7] = 64;
        h[8] = 0xfd; h[11] = 1; h[23] = 2;                // fd00:1::2
        h[24] = 0xfd; h[26] = 0x01; h[27] = 0xf4; h[39] = 2;  // fd00:1f4::2
        l3 = 40;
    } else {
        h[0] = 0x45;
        h[1] = 0x01;  // ECT(1)
        h[3] = 20 + 40;
        h[6] = 0x40;
        h[8] = 64;
        h[9] = 17;
        h[12] = 198; h[13] = 18; h[14] = 1; h[15] = 2;
        h[16] = 198; h[17] = 18; h[18] = 125; h[19] = 130;
        uint32_t sum = 0;
        for (int i = 0; i < 20; i += 2) sum += (uint32_t)(h[i] << 8 | h[i + 1]);
        while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
        h[10] = (uint8_t)(~sum >> 8);
        h[11] = (uint8_t)~sum;
        l3 = 20;
    }
    uint8_t *u = h + l3;
    u[0] = 0x9c; u[1] = 0x40;  // source port 40000
    u[2] = (uint8_t)(port >> 8); u[3] = (uint8_t)port;
    u[5] = 40;
    return 14 + l3 + 40;
}

static int frame_dscp(const uint8_t *f, int v6) {
    return v6 ? ((f[14] & 0x0f) << 2 | f[15] >> 6) : f[15] >> 2;
}

// One BPF_PROG_TEST_RUN; returns ns per run, and the DSCP of the frame that
// left the last run (the runs share one skb, so a rewrite persists).
static double run(int prog, const uint8_t *f, int len, int repeat, int v6, uint32_t want_ret, int *dscp) {
    uint8_t out[256];
    struct __sk_buff ctx = {.ifindex = 1, .ingress_ifindex = 2};
    LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f, .data_size_in = (uint32_t)len, .data_out = out,
                .data_size_out = sizeof(out), .ctx_in = &ctx, .ctx_size_in = sizeof(ctx),
                .repeat = repeat);
    if (bpf_prog_test_run_opts(prog, &o)) { perror("qosify-run: BPF_PROG_TEST_RUN"); exit(1); }
    if (o.retval != want_ret) { fprintf(stderr, "qosify-run: program returned %d\n", (int)o.retval); exit(1); }
    if (dscp) *dscp = frame_dscp(out, v6);
    return o.duration;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    double s[n];
    memcpy(s, v, sizeof(s));
    qsort(s, (size_t)n, sizeof(double), cmp);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double minimum(double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++) if (v[i] < m) m = v[i];
    return m;
}

// qosify's ipv4_map and ipv6_map give key_size without a BTF key type, which
// the kernel refuses with BTF; libbpf then creates them without BTF, as on
// OpenWrt. Its two notices about that are dropped, the rest passes.
static int print(enum libbpf_print_level level, const char *fmt, va_list ap) {
    if (level == LIBBPF_DEBUG || strstr(fmt, "bpf_create_map_xattr") || strstr(fmt, "Retrying without BTF"))
        return 0;
    return vfprintf(stderr, fmt, ap);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    libbpf_set_print(print);
    if (argc != 5) { fprintf(stderr, "usage: qosify-run QOSIFY_OBJECT NULL_OBJECT REPEAT ROUNDS\n"); return 64; }
    int repeat = atoi(argv[3]), rounds = atoi(argv[4]);
    if (repeat < 1 || rounds < 1 || rounds > 100) { fprintf(stderr, "qosify-run: bad REPEAT or ROUNDS\n"); return 64; }

    struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
    if (!obj || libbpf_get_error(obj)) { fprintf(stderr, "qosify-run: cannot open %s\n", argv[1]); return 1; }
    // qosify's maps are pinned by name; unpinned here, so nothing outlives the run.
    struct bpf_map *m;
    bpf_object__for_each_map(m, obj) bpf_map__set_pin_path(m, NULL);
    if (bpf_object__load(obj)) { fprintf(stderr, "qosify-run: cannot load %s\n", argv[1]); return 1; }
    struct bpf_program *p = bpf_object__find_program_by_name(obj, "classify");
    if (!p) { fprintf(stderr, "qosify-run: no program classify\n"); return 1; }
    int prog = bpf_program__fd(p);
    struct bpf_object *nobj = bpf_object__open_file(argv[2], NULL);
    if (!nobj || libbpf_get_error(nobj) || bpf_object__load(nobj)) { fprintf(stderr, "qosify-run: cannot load %s\n", argv[2]); return 1; }
    int null = bpf_program__fd(bpf_object__next_program(nobj, NULL));

    class_fd = map_fd(obj, "class_map");
    flow_fd = map_fd(obj, "flow_map");
    uint8_t cls = QOSIFY_DSCP_CLASS_FLAG, fb = QOSIFY_DSCP_FALLBACK_FLAG;
    set_class(BESTEFFORT, CS0, QOSIFY_CLASS_FLAG_PRESENT, 0, 0, UNSET, UNSET, 0);
    set_class(BULK, LE, QOSIFY_CLASS_FLAG_PRESENT, 0, 0, UNSET, UNSET, 0);
    set_class(VIDEO, AF41, QOSIFY_CLASS_FLAG_PRESENT, 0, 0, UNSET, UNSET, 0);
    set_class(VOICE, CS6, QOSIFY_CLASS_FLAG_PRESENT, 100, 5, CS0, UNSET, 0);
    set_bench(true);
    // Default slots (tcp_default, udp_default): DSCP 0, the global flow config, not present.
    set_class(QOSIFY_MAX_CLASS_ENTRIES, 0, 0, 0, 0, UNSET, cls | VIDEO, 500);
    set_class(QOSIFY_MAX_CLASS_ENTRIES + 1, 0, 0, 0, 0, UNSET, cls | VIDEO, 500);
    struct qosify_config config = {.dscp_icmp = cls | fb | BESTEFFORT};
    uint32_t zero = 0;
    if (bpf_map_update_elem(map_fd(obj, "config"), &zero, &config, BPF_ANY)) fail("config update");
    int tcp = map_fd(obj, "tcp_ports"), udp = map_fd(obj, "udp_ports");
    // Keys are the port as the program reads it from the header (network order).
    uint8_t tdef = cls | QOSIFY_MAX_CLASS_ENTRIES, udef = cls | BESTEFFORT;
    for (uint32_t port = 0; port < 65536; port++) {
        uint32_t key = (uint32_t)__builtin_bswap16((uint16_t)port);
        bpf_map_update_elem(tcp, &key, &tdef, BPF_ANY);
        bpf_map_update_elem(udp, &key, &udef, BPF_ANY);
    }
    struct { int map; uint16_t port; uint8_t v; } files[] = {
        {tcp, 53, cls | VOICE}, {tcp, 5353, cls | VOICE}, {udp, 53, cls | VOICE}, {udp, 5353, cls | VOICE},
        {udp, 123, cls | VOICE}, {tcp, 22, cls | fb | VIDEO}, {tcp, 80, cls | fb | BESTEFFORT},
        {tcp, 443, cls | fb | BESTEFFORT}, {udp, 80, cls | fb | BESTEFFORT}, {udp, 443, cls | fb | BESTEFFORT},
        {tcp, PORT_HIT, cls | BENCH}, {udp, PORT_HIT, cls | BENCH},
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        uint32_t key = __builtin_bswap16(files[i].port);
        if (bpf_map_update_elem(files[i].map, &key, &files[i].v, BPF_ANY)) fail("port map update");
    }

    const uint32_t unspec = (uint32_t)TC_ACT_UNSPEC;
    const char *name[3] = {"qosify, bulk detection off", "qosify, stock bulk detection", "qosify, stock"};
    const char *what[3] = {"port-map hit", "port-map hit", "no port-map hit"};
    double over[2][3];
    printf("qosify: repeat %d, median of %d rounds (min in brackets); ns per run\n", repeat, rounds);
    printf("| case | family | packet | ns | empty program ns | over empty |\n|---|---|---|---|---|---|\n");
    for (int v6 = 0; v6 <= 1; v6++) {
        uint8_t hit[128], miss[128];
        int hlen = frame(hit, v6, PORT_HIT), mlen = frame(miss, v6, PORT_MISS);
        int d;
        // b's first packet of a new flow is not yet bulk: the class's DSCP.
        set_bench(true);
        forget_flows();
        run(prog, hit, hlen, 1, v6, unspec, &d);
        if (d != EF) fail("stock bulk detection: the first packet of a flow did not leave with EF");
        double ns[3][rounds], base[rounds];
        for (int r = 0; r < rounds; r++) {
            base[r] = run(null, hit, hlen, repeat, v6, TC_ACT_OK, NULL);
            for (int c = 0; c < 3; c++) {
                set_bench(c == 1);
                set_class(BESTEFFORT, CS0, QOSIFY_CLASS_FLAG_PRESENT, 0, 0, UNSET, UNSET, 0);
                ns[c][r] = run(prog, c == 2 ? miss : hit, c == 2 ? mlen : hlen, repeat, v6, unspec, &d);
                uint64_t bench = class_packets(BENCH), be = class_packets(BESTEFFORT);
                if (c == 0 && (d != EF || bench != (uint64_t)repeat))
                    fail("port-map hit did not leave with EF in class bench");
                if (c == 1 && (d != CS0 || bench != (uint64_t)repeat))
                    fail("stock bulk detection: the flow did not leave as bulk (CS0) in class bench");
                if (c == 2 && (d != CS0 || be != (uint64_t)repeat || bench != 0))
                    fail("no port-map hit: the packet did not stay DSCP 0 in class besteffort");
            }
        }
        double b = median(base, rounds), bmin = minimum(base, rounds);
        for (int c = 0; c < 3; c++) {
            double med = median(ns[c], rounds), low = minimum(ns[c], rounds);
            over[v6][c] = med - b;
            printf("| %s | IPv%d | %s | %.1f (%.0f) | %.1f (%.0f) | %+.1f (%+.0f) |\n", name[c], v6 ? 6 : 4,
                   what[c], med, low, b, bmin, med - b, low - bmin);
        }
    }
    printf("  (checks passed: hit EF in bench, bulk flow CS0 in bench, no hit DSCP 0 in besteffort)\n");
    printf("half of qosify's port-map hit = %.1f ns (IPv4), %.1f ns (IPv6) over empty\n", over[0][0] / 2,
           over[1][0] / 2);
    printf("half of qosify's port-map hit + bulk detection = %.1f ns (IPv4), %.1f ns (IPv6) over empty\n",
           over[0][1] / 2, over[1][1] / 2);
    return 0;
}
