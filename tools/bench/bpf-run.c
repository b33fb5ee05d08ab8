// Benchmark harness: runs qosmapd's tc classifier (Bpf/qosmap.bpf.c, built
// with clang -target bpf by tools/bench/bpf-prog) in the kernel through
// BPF_PROG_TEST_RUN, the way `bpftool prog run` does, on an IPv4 and an IPv6
// UDP frame whose DSCP the table rewrites (every entry maps d to d^1, so each
// repeat rewrites again) and on a frame the table keeps. Prints the kernel's
// average ns per run for each, and for a program that returns at once (the
// peer: the cost of the test-run loop itself).
// Usage: bpf-run OBJECT NULL_OBJECT REPEAT
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// QM_PER_PAIR of the object measured (-DPER_PAIR=80 for builds before flow rules).
#ifndef PER_PAIR
#define PER_PAIR 104
#endif

struct qm_entry {
    uint8_t dscp, flags, cell, pad;
    uint32_t mark_value, mark_mask, priority;
};

static int frame(uint8_t *f, int v6, uint8_t dscp) {
    memset(f, 0, 128);
    f[12] = v6 ? 0x86 : 0x08;
    f[13] = v6 ? 0xdd : 0x00;
    uint8_t tos = (uint8_t)(dscp << 2 | 1);  // ECT(1): the harness checks nothing, ECN is just present
    if (v6) {
        uint8_t *h = f + 14;
        h[0] = 0x60 | tos >> 4;
        h[1] = (uint8_t)(tos << 4);
        h[5] = 8 + 32;  // payload length
        h[6] = 17;
        h[7] = 64;
        h[8] = 0xfd; h[23] = 1; h[24] = 0xfd; h[39] = 2;
        return 14 + 40 + 8 + 32;
    }
    uint8_t *h = f + 14;
    h[0] = 0x45;
    h[1] = tos;
    h[3] = 20 + 8 + 32;
    h[8] = 64;
    h[9] = 17;
    h[12] = 198; h[13] = 18; h[15] = 1; h[16] = 198; h[17] = 19; h[19] = 1;
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += (uint32_t)(h[i] << 8 | h[i + 1]);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    h[10] = (uint8_t)(~sum >> 8);
    h[11] = (uint8_t)~sum;
    return 14 + 20 + 8 + 32;
}

static int open_prog(const char *path, struct bpf_object **obj, const char *name) {
    *obj = bpf_object__open_file(path, NULL);
    if (!*obj || libbpf_get_error(*obj)) { fprintf(stderr, "bpf-run: cannot open %s\n", path); exit(1); }
    if (bpf_object__load(*obj)) { fprintf(stderr, "bpf-run: cannot load %s\n", path); exit(1); }
    struct bpf_program *p = name ? bpf_object__find_program_by_name(*obj, name) : bpf_object__next_program(*obj, NULL);
    if (!p) { fprintf(stderr, "bpf-run: no program %s in %s\n", name, path); exit(1); }
    return bpf_program__fd(p);
}

static double run(int prog, uint8_t *f, int len, int repeat) {
    uint8_t out[256];
    struct __sk_buff ctx = {.ifindex = 1, .ingress_ifindex = 2};
    LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f, .data_size_in = (uint32_t)len, .data_out = out,
                .data_size_out = sizeof(out), .ctx_in = &ctx, .ctx_size_in = sizeof(ctx),
                .repeat = repeat);
    if (bpf_prog_test_run_opts(prog, &o)) { perror("bpf-run: BPF_PROG_TEST_RUN"); exit(1); }
    if (o.retval != TC_ACT_OK) { fprintf(stderr, "bpf-run: program returned %u\n", o.retval); exit(1); }
    return o.duration;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: bpf-run OBJECT NULL_OBJECT REPEAT\n"); return 64; }
    int repeat = atoi(argv[3]);
    struct bpf_object *obj, *nobj;
    int prog = open_prog(argv[1], &obj, "qosmap_egress");
    int null = open_prog(argv[2], &nobj, NULL);
    uint32_t zero = 0, one = 1, two = 2, lo = 1;
    uint32_t pol[2] = {1, 1};
    bpf_map_update_elem(bpf_object__find_map_fd_by_name(obj, ".data.qm_gen"), &zero, &zero, BPF_ANY);
    bpf_map_update_elem(bpf_object__find_map_fd_by_name(obj, "qm_ingress"), &two, pol, BPF_ANY);
    bpf_map_update_elem(bpf_object__find_map_fd_by_name(obj, "qm_egress"), &lo, pol, BPF_ANY);
    int table = bpf_object__find_map_fd_by_name(obj, "qm_table");
    for (uint32_t d = 0; d < 64; d++) {
        // Rewriting table: d -> d^1. Slot 0, ingress policy 1, egress policy 1
        // (PER_PAIR entries a pair: 64 by DSCP, 16 by PCP and DEI, 24 by cell).
        struct qm_entry e = {.dscp = (uint8_t)(d ^ 1), .flags = 1, .cell = 0};
        uint32_t i = ((0 * 16 + 1) * 16 + 1) * PER_PAIR + d;
        bpf_map_update_elem(table, &i, &e, BPF_ANY);
        // Keeping table under egress policy 2 (used by the "kept" case).
        e.dscp = (uint8_t)d;
        i = ((0 * 16 + 1) * 16 + 2) * PER_PAIR + d;
        bpf_map_update_elem(table, &i, &e, BPF_ANY);
    }
    (void)one;
    uint8_t f[128];
    int len;
    len = frame(f, 0, 11);
    double null4 = run(null, f, len, repeat);
    double rw4 = run(prog, f, len, repeat);
    len = frame(f, 1, 11);
    double null6 = run(null, f, len, repeat);
    double rw6 = run(prog, f, len, repeat);
    uint32_t keep[2] = {2, 2};
    bpf_map_update_elem(bpf_object__find_map_fd_by_name(obj, "qm_egress"), &lo, keep, BPF_ANY);
    len = frame(f, 0, 11);
    double kept4 = run(prog, f, len, repeat);
    printf("null4 %.1f rewrite4 %.1f null6 %.1f rewrite6 %.1f kept4 %.1f\n", null4, rw4, null6, rw6, kept4);
    return 0;
}
