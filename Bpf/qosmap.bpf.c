// qosmapd's in-kernel datapath: a tc clsact egress classifier that remarks
// DSCP (ECN kept) and sets skb mark and priority from tables the daemon
// compiles (see Sources/BPFClassifier and Sources/QoSMapDaemon/EBPFDatapath.swift).
//
// Maps (their layout is mirrored in BPFTableLayout.swift; a test checks it):
//   qm_gen      u32, a global variable (libbpf's map ".data.qm_gen", ARRAY[1]
//               of u32): the active slot (0 or 1) and the QM_GEN_* bits. The
//               daemon fills the other slot whole, then flips this one word: a
//               packet reads it once, so it decides with one slot only and
//               never half a table. A global rather than a map of its own: the
//               program reads it with one load, where a lookup puts its key
//               through the stack and tests its bound, at the head of every
//               packet's dependency chain.
//   qm_ingress  ARRAY[QM_IFINDEX_ARRAY] ifindex -> u32[2]: the ingress policy
//               per slot (unset: 0). ifindex >= QM_IFINDEX_ARRAY: qm_ingress_hash.
//   qm_egress   the same for the egress policy (qm_egress_hash above it).
//               Arrays because a hash lookup cost about 25 ns each here
//               (tools/bench/bpf-run: 140 ns a packet with hashes, 12 with arrays).
//   qm_table    ARRAY[2 * IN * OUT * 80] of struct qm_entry: per (slot, in,
//               out), 64 entries by DSCP, then 16 by PCP << 1 | DEI.
//   qm_config   struct qm_config, a global variable (map ".data.qm_config",
//               ARRAY[1], read with one load as qm_gen is): the skb->mark
//               bits that carry a tag's PCP and DEI from qosmap_ingress to
//               qosmap_egress.
//   qm_counters PERCPU_ARRAY[CELLS * OUTCOMES + 1] of u64.
// qosmap_ingress runs at clsact ingress on interfaces that trust 802.1p: it
// puts the tag's PCP and DEI (0 and 0 for an untagged frame) in the carry
// bits of skb->mark; qosmap_egress then picks the entry by them, not by
// DSCP, and clears those bits. (skb->mark is what survives forwarding:
// skb->tc_index and skb->cb do not, and ip_forward rewrites skb->priority.)
//   Flow rules (`classify:`, FlowClassifier.swift compiled; see below
//   "Flow rules") are in the qm_f* maps, two slots like qm_table; bit 1 of
//   qm_gen says that the active slot has rules, so a config without rules
//   pays nothing more than a shift.
// Ingress policy 0 is `local` (ingress ifindex 0: host-originated) and every
// interface without a policy of its own.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define QM_IFINDEX_ARRAY 4096
#define QM_MAX_IN 16
#define QM_MAX_OUT 16
#define QM_PER_PAIR 104  // 64 by DSCP, 16 by PCP << 1 | DEI (trust 8021p), 24 by cell (flow rules)
#define QM_PCP_BASE 64
#define QM_RULE_BASE 80  // a flow rule's treatment: the entry of its class x color cell
#define QM_CARRIED 0x10u  // in the carried mark bits: PCP and DEI are there
#define QM_CELLS 24
#define QM_OUTCOMES 8
#define QM_MALFORMED_SLOT (QM_CELLS * QM_OUTCOMES)
// PacketOutcome raw values (Sources/QoSMapDaemon/PacketOutcome.swift).
#define QM_REWRITTEN 0
#define QM_UNCHANGED 1

#define QM_F_DSCP 1u      // write `dscp` into the packet
#define QM_F_MARK 2u      // skb->mark = (mark & ~mark_mask) | mark_value
#define QM_F_PRIORITY 4u  // skb->priority = priority

struct qm_entry {
    __u8 dscp;
    __u8 flags;
    __u8 cell;  // Treatment.cellIndex, for the counters
    __u8 pad;
    __u32 mark_value;
    __u32 mark_mask;
    __u32 priority;
};

struct qm_config {
    __u32 carry_mask;   // contiguous bits of skb->mark, at least 5
    __u32 carry_shift;  // the mask's lowest bit
};

struct qm_policy {
    __u32 slot[2];
};

// Not static: clang may not assume its value (the daemon writes it).
__u32 qm_gen SEC(".data.qm_gen") = 0;

// A global the daemon writes, read once where it stands (one load, not kept
// from an earlier read): the kernel's READ_ONCE.
#define QM_READ(x) (*(volatile __typeof__(x) *)&(x))

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, QM_IFINDEX_ARRAY);
    __type(key, __u32);
    __type(value, struct qm_policy);
} qm_ingress SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, QM_IFINDEX_ARRAY);
    __type(key, __u32);
    __type(value, struct qm_policy);
} qm_egress SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1024);
    __type(key, __u32);
    __type(value, struct qm_policy);
} qm_ingress_hash SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1024);
    __type(key, __u32);
    __type(value, struct qm_policy);
} qm_egress_hash SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 2 * QM_MAX_IN * QM_MAX_OUT * QM_PER_PAIR);
    __type(key, __u32);
    __type(value, struct qm_entry);
} qm_table SEC(".maps");

// Not static: clang may not assume its value (the daemon writes it).
struct qm_config qm_config SEC(".data.qm_config") = {0, 0};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, QM_CELLS * QM_OUTCOMES + 1);
    __type(key, __u32);
    __type(value, __u64);
} qm_counters SEC(".maps");

static __always_inline void count(__u32 index) {
    __u64 *n = bpf_map_lookup_elem(&qm_counters, &index);
    if (n) *n += 1;  // per-CPU: no atomic needed
}

// An interface's policies: the array below QM_IFINDEX_ARRAY, the hash above
// it. The array is looked up every time (key 0, never an interface, when the
// ifindex is large): with one call under a choice of two maps, clang merges
// the calls and the verifier can no longer inline the array lookup.
static __always_inline struct qm_policy *policy(void *array, void *hash, __u32 ifindex) {
    __u32 k = ifindex < QM_IFINDEX_ARRAY ? ifindex : 0;
    struct qm_policy *p = bpf_map_lookup_elem(array, &k);
    if (ifindex >= QM_IFINDEX_ARRAY) p = bpf_map_lookup_elem(hash, &ifindex);
    return p;
}

// ---- Flow rules -----------------------------------------------------------
// The rules compiled by QoSMapCore's FlowClassifier (Recursive Flow
// Classification): per slot, a class per field value (protocol, DSCP, each
// port; addresses by a 12-step binary search over interval starts), then six
// cross-product tables down to rule + 1. The layout is mirrored in
// EBPFFlowTables.swift (EBPFFlowLayout); the tests run this program against
// the nfqueue pipeline.
//   qm_fslot   ARRAY[2] struct qm_fslot: one value per slot with the counts,
//              the cross tables' bases and widths, the classes by protocol,
//              DSCP and port, the six cross tables, the address intervals
//              (source, destination; IPv4, IPv6: starts, classes, index)
//              and each rule's cell by ingress policy (`dscp:` actions
//              classify by the ingress domain) with whether it keeps its
//              connection (2.6 MB): one map lookup for the whole
//              classification. An array lookup is inlined, but each still
//              puts its key through the stack and costs a bound test and a
//              multiply on the hit's dependency chain, and makes clang
//              spill the registers a call would clobber.
//   qm_frcount PERCPU_ARRAY[2 * QM_MAX_RULES] packets and bytes per rule.
//   qm_flows   ARRAY[QM_FLOW_SLOTS] struct qm_flow: the connection table,
//              direct-mapped like QoSMapCore's ConnectionTable (same key,
//              same hash, same slot), so that both datapaths keep and
//              lose the same connections: a flow whose slot another matched
//              flow takes is classified by trust until its next matched packet.
#define QM_MAX_RULES 4096
#define QM_MAX_INTERVALS 4096
#define QM_CROSS (1 << 20)
#define QM_FLOW_SLOTS 65536
#define QM_MAX_EXT 6  // PacketFlow.maxExtensionHeaders
#define QM_GEN_RULES 2u  // in qm_gen: the active slot has flow rules
#define QM_W_NOCOUNT 0x2u  // in qm_rule's `who`: the rule not counted (download shaping)

struct qm_fconf {
    __u32 track;  // a rule keeps per-connection state
    __u32 epoch;  // 1-65535: flow entries of another epoch are forgotten
    __u32 n[4];   // interval counts: source v4, destination v4, source v6, destination v6
    __u32 base[6];   // cross tables: protocol x dport, x sport, source x destination,
    __u32 width[6];  // ingress x DSCP, ports x arrival, final (rule + 1)
    __u16 addr0[4];  // the class of every address where n[i] is 1 (no search, no lookup)
    // dns: rules (FlowClassifier.dnsClass, .addressesDNS), in `cross` too:
    __u32 dns;     // 1: read the destination's learned mask (qm_fdns4/6)
    __u32 dbase;   // (addresses, dns) table: base and width
    __u32 dwidth;
    __u32 dclass;  // class by mask (2^N entries, N <= 12): base
    // Bit k: cross table k is the identity in its row input (one column,
    // table[i] == i; EBPFFlowTables.swift checks the contents): the program
    // takes the row class as the result, a dependent load fewer.
    // QM_FOLD4/QM_FOLD6 (2 bits each): the family's address stage folded
    // into one field's classes (the other field has one class): 1, the
    // source's class is the stage's result; 2, the destination's.
    // QM_FUSE, QM_RCELL: below.
    __u32 skip;
    // With QM_FUSE in `skip` (stages 1 and 4 the identity, 0 and 5 not):
    // stages 0 and 5 as one table from here, by (protocol x dport) x
    // addresses, width[0] and width[5] its dimensions (a dependent load
    // and multiply fewer on the way to the rule).
    __u32 fbase;
};

// The address search's index (EBPFFlowTables.swift, bucketIndex): the
// address's bits after `shift`, above `base`, pick one of QM_IDX buckets
// (QM_IDX: below the window, QM_IDX + 1: above it); its entry is where the
// search starts (low 12 bits) and how many steps it takes (high 4 bits),
// so that starts packed in one prefix (1,000 /26 in a /16) take a step or
// two instead of 12.
#define QM_IDX 1024
#define QM_IDX_N (QM_IDX + 4)  // below, above, and padding to 8 bytes
// An entry: bits 0-11 the first candidate, 12-15 the steps. Steps
// QM_IDX_ONE (more than a search takes) when every address of the bucket
// has one class, which is then in bits 16-31: no search, and no load that
// waits for the entry's candidate. (16 bits, as a class read from `cls`:
// the verifier's states after either way look alike and prune.)
#define QM_IDX_ONE 15
// Steps QM_IDX_TWO when one interval starts inside the bucket, at the key
// in the bucket's `isplit` (an IPv6 start there has low half 0): the class
// below it in bits 16-31, the class from it in bits 0-11. No search either;
// the split's load runs beside the entry's.
#define QM_IDX_TWO 14
#define QM_FOLD4 6
#define QM_FOLD6 8
#define QM_FUSE (1u << 10)
// QM_RCELL in `skip`: the final stage's results are rule + 1 (bits 0-10)
// with the rule's cell above it (bits 11-15), the same for every ingress
// policy, and every rule keeps its connection or none does (`track`): the
// rule's byte is then not read on the way to the entry (a dependent load
// fewer). EBPFFlowTables.cellCarried says when.
#define QM_RCELL (1u << 11)
#define QM_RCELL_SHIFT 11

struct qm_faddr4 {
    __u32 start[QM_MAX_INTERVALS];
    __u16 cls[QM_MAX_INTERVALS];
    __u32 zero;  // 0, read at run time (see qm_addr6)
    __u32 pad;
    __u64 ibase;
    __u32 ishift;
    __u32 ipad;
    __u64 isplit[QM_IDX];
    __u32 idx[QM_IDX_N];
};

struct qm_faddr6 {
    __u64 hi[QM_MAX_INTERVALS];
    __u64 lo[QM_MAX_INTERVALS];
    __u16 cls[QM_MAX_INTERVALS];
    __u32 zero;
    __u32 pad;
    __u64 ibase;  // the index over the high halves
    __u32 ishift;
    __u32 ipad;
    __u64 isplit[QM_IDX];
    __u32 idx[QM_IDX_N];
};

// In a rule's byte for an ingress policy (qm_fslot.rule): the rule keeps
// its connection. The low bits are the cell (below QM_CELLS).
#define QM_R_CONN 0x80u
// Rule r - 1's byte for ingress policy `in` (QM_R_CONN | cell).
#define QM_RULE_BYTE(t, r, in) ((t)->rule[((r) - 1) & (QM_MAX_RULES - 1)][in])

struct qm_fslot {
    struct qm_fconf c;
    __u16 proto[256];
    __u16 dscp[64];
    __u16 port[2][65536];  // source, destination
    __u16 cross[QM_CROSS];
    struct qm_faddr4 a4[2];  // source, destination
    struct qm_faddr6 a6[2];
    __u8 rule[QM_MAX_RULES][QM_MAX_IN];  // cell by ingress policy | QM_R_CONN
};

struct qm_rcount {
    __u64 packets;
    __u64 bytes;
};

struct qm_flow {
    __u32 w[10];  // FlowKey's words
    __u32 tag;    // rule + 1 | epoch << 16; 0 empty
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 2);
    __type(key, __u32);
    __type(value, struct qm_fslot);
} qm_fslot SEC(".maps");

// dns: rules: the learned addresses' group masks (DNSLearning in qosmapd;
// both slots share them), by destination address as the program holds it
// (host-order words). Not preallocated: the daemon bounds the entries by
// classify.dns.max-addresses.
#define QM_DNS_MAX (1 << 22)
struct qm_dkey6 {
    __u32 w[4];
};

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, QM_DNS_MAX);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, __u32);
    __type(value, __u32);
} qm_fdns4 SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, QM_DNS_MAX);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, struct qm_dkey6);
    __type(value, __u32);
} qm_fdns6 SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 2 * QM_MAX_RULES);
    __type(key, __u32);
    __type(value, struct qm_rcount);
} qm_frcount SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, QM_FLOW_SLOTS);
    __type(key, __u32);
    __type(value, struct qm_flow);
} qm_flows SEC(".maps");

// What flow rules read (PacketFlow.fields): addresses as four host-order
// words (IPv4 in word 3, as FlowKey has them).
struct qm_fields {
    // 8-aligned: qm_flow_key reads each address as two u64 (the verifier
    // refuses a misaligned stack access).
    __u32 s[4] __attribute__((aligned(8))), d[4];
    __u16 sp, dp;
    __u8 proto, has_proto, has_ports, dscp;
    // 1: read (qm_parse_fast, qm_parse). In the fields rather than a local:
    // mark_ip keeps no register live across the rule code for it. 64 bits:
    // the struct has no padding, which the verifier would find unwritten.
    __u64 ok;
    // qm_flow_key's key and (khash, 1 << 32 |) hash, once computed (khash 0:
    // not yet): qm_rule leaves it in qm_step for the behaviour step, which
    // then does not hash the flow again. Zeroed by mark_ip's copies that
    // call qm_step4/6.
    __u64 key[5];
    __u64 khash;
};

static __always_inline int qm_has_ports(__u8 p) {
    return p == 6 || p == 17 || p == 33 || p == 132 || p == 136;
}

static __always_inline __u32 qm_be32(const __u8 *b) {
    return (__u32)b[0] << 24 | (__u32)b[1] << 16 | (__u32)b[2] << 8 | b[3];
}

// A big-endian word of the packet in place: one 32-bit load and a byte swap
// (BPF_END), not four byte loads, three shifts and three ors. The address
// words sit at offsets 2 mod 4 from skb->data, 4-aligned counting the
// NET_IP_ALIGN the verifier adds where it checks alignment (strict
// alignment; not x86 or arm64); the ports are 2-aligned alike.
// The empty asm, measured rather than understood: without it, or with
// IPv4's two words read this way too, clang lays mark_ip out differently and
// the verifier walks 972,924-976,808 instructions of its 1,000,000 (859,020
// as written).
static __always_inline __u32 qm_pkt_be32(const __u8 *b) {
    __u64 x = __builtin_bswap32(*(const __u32 *)b);
    asm volatile("" : "+r"(x));
    return (__u32)x;
}

// The same for a big-endian port.
static __always_inline __u16 qm_pkt_be16(const __u8 *b) { return __builtin_bswap16(*(const __u16 *)b); }

// PacketFlow.fields for the IP packet at `off`, whose length is
// skb->len - off. 0 when it has no whole fixed header (no rule applies, as
// on nfqueue). The fixed header and the ports right after it are loaded at
// once; the ports behind IPv4 options or IPv6 extension headers at their
// offset. (bpf_skb_load_bytes: `off` is not a constant here, and a packet
// pointer moved by a register needs CAP_PERFMON.)
static __always_inline int qm_parse(struct __sk_buff *skb, __u32 off, int v6, struct qm_fields *f) {
    __u8 b[44];
    __u32 len = skb->len > off ? skb->len - off : 0;
    __u32 l4, have;
    int later = 0;
    f->has_ports = 0;
    f->sp = 0;
    f->dp = 0;
    if (!v6) {
        if (len < 20) return 0;
        if (len >= 24) {
            if (bpf_skb_load_bytes(skb, off, b, 24) < 0) return 0;
            have = 24;
        } else {
            if (bpf_skb_load_bytes(skb, off, b, 20) < 0) return 0;
            // Written on every path, as the verifier wants without CAP_PERFMON
            // (it does not tie `have` to the load that set it).
            __builtin_memset(b + 20, 0, 4);
            have = 20;
        }
        if ((b[0] & 0x0f) < 5) return 0;
        f->s[0] = f->s[1] = f->s[2] = 0;
        f->d[0] = f->d[1] = f->d[2] = 0;
        f->s[3] = qm_be32(b + 12);
        f->d[3] = qm_be32(b + 16);
        f->proto = b[9];
        f->dscp = b[1] >> 2;
        later = (((__u32)b[6] << 8 | b[7]) & 0x1fff) != 0;
        l4 = (b[0] & 0x0f) * 4;
    } else {
        if (len < 40) return 0;
        if (len >= 44) {
            if (bpf_skb_load_bytes(skb, off, b, 44) < 0) return 0;
            have = 44;
        } else {
            if (bpf_skb_load_bytes(skb, off, b, 40) < 0) return 0;
            __builtin_memset(b + 40, 0, 4);  // as for IPv4
            have = 40;
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            f->s[i] = qm_be32(b + 8 + 4 * i);
            f->d[i] = qm_be32(b + 24 + 4 * i);
        }
        f->dscp = (__u8)((b[0] << 4) | (b[1] >> 4)) >> 2;
        __u8 next = b[6];
        __u32 o = 40;
        // Unrolled: clang lays this loop out with the step that advances `o`
        // falling through into the test, and 6.1's verifier refuses a loop
        // whose back-edge is a fall-through ("back-edge from insn"), with or
        // without CAP_BPF. Unrolled, the object has no loop at all.
#pragma unroll
        for (int n = 0; n <= QM_MAX_EXT; n++) {
            if (!(next == 0 || next == 43 || next == 60 || next == 51 || next == 44)) break;
            __u8 e[8];
            if (n == QM_MAX_EXT || o + 8 > len || bpf_skb_load_bytes(skb, off + o, e, 8) < 0) {
                f->has_proto = 0;  // protocol unknown: no ports either
                f->proto = 0;
                f->ok = 1;
                return 1;
            }
            if (next == 44) {
                next = e[0];
                o += 8;
                if (((__u32)e[2] << 8 | e[3]) >> 3) {
                    later = 1;
                    break;
                }
            } else {
                __u32 l = next == 51 ? ((__u32)e[1] + 2) * 4 : ((__u32)e[1] + 1) * 8;
                next = e[0];
                o += l;
            }
        }
        f->proto = next;
        l4 = o;
    }
    f->has_proto = 1;
    if (!later && qm_has_ports(f->proto) && l4 + 4 <= len) {
        // Initialised: without CAP_PERFMON the verifier refuses a read of
        // stack it cannot prove written on every path.
        __u8 p[4] = {0};
        if (l4 + 4 <= have) {
            // l4 is 20 (IPv4) or 40 (IPv6) here.
            if (v6) __builtin_memcpy(p, b + 40, 4);
            else __builtin_memcpy(p, b + 20, 4);
        } else if (bpf_skb_load_bytes(skb, off + l4, p, 4) < 0) {
            f->ok = 1;
            return 1;
        }
        f->sp = (__u16)(p[0] << 8 | p[1]);
        f->dp = (__u16)(p[2] << 8 | p[3]);
        f->has_ports = 1;
    }
    f->ok = 1;
    return 1;
}

// An empty asm that takes and returns `p`: clang cannot merge two calls with
// different inputs (an inline asm operand never becomes a phi), so each branch
// keeps its own constant offset into the packet.
static __always_inline const __u8 *qm_l4_pin(const __u8 *p) {
    asm volatile("" : "+r"(p));
    return p;
}

// The common case of qm_parse, read in place by mark_ip's inlined copies
// (`off` a constant there): an IPv4 header without options or an IPv6
// header whose next header is not an extension header, with the ports in
// the linear data. 1 when it filled `f`, 0 to leave it to qm_parse.

static __always_inline int qm_parse_fast(struct __sk_buff *skb, const __u32 off, int v6, struct qm_fields *f) {
    void *data = (void *)(long)skb->data;
    void *end = (void *)(long)skb->data_end;
    __u8 *h = data + off;
    if (!v6) {
        if ((void *)(h + 24) > end || h[0] != 0x45) return 0;
        __u8 p = h[9];
        // Fragments and protocols without ports take the general path.
        if (((h[6] << 8 | h[7]) & 0x1fff) || !qm_has_ports(p)) return 0;
        f->s[0] = f->s[1] = f->s[2] = 0;
        f->d[0] = f->d[1] = f->d[2] = 0;
        // Byte loads here, not qm_pkt_be32: with them the verifier walks
        // about 100,000 more instructions (see qm_pkt_be32).
        f->s[3] = qm_be32(h + 12);
        f->d[3] = qm_be32(h + 16);
        f->proto = p;
        f->dscp = h[1] >> 2;
        // The transport header's offset stays in this branch (qm_l4_pin):
        // merged with the IPv6 branch, clang adds a per-path register to the
        // packet pointer, which the verifier refuses without CAP_PERFMON.
        const __u8 *l4 = qm_l4_pin(h + 20);
        f->sp = qm_pkt_be16(l4);
        f->dp = qm_pkt_be16(l4 + 2);
    } else {
        if ((void *)(h + 44) > end) return 0;
        __u8 p = h[6];
        if (!qm_has_ports(p)) return 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            f->s[i] = qm_pkt_be32(h + 8 + 4 * i);
            f->d[i] = qm_pkt_be32(h + 24 + 4 * i);
        }
        f->proto = p;
        f->dscp = (__u8)((h[0] << 4) | (h[1] >> 4)) >> 2;
        const __u8 *l4 = qm_l4_pin(h + 40);
        f->sp = qm_pkt_be16(l4);
        f->dp = qm_pkt_be16(l4 + 2);
    }
    f->has_proto = 1;
    f->has_ports = 1;
    f->ok = 1;
    return 1;
}

// `x`, which clang can no longer fold (the verifier still knows it).
static __always_inline __u32 qm_launder(__u32 x) {
    asm volatile("" : "+r"(x));
    return x;
}

// `x` as an opaque 64-bit value: clang then spills it with a 64-bit store.
// A 32-bit store into a stack slot that held a spilled pointer is refused
// without CAP_PERFMON ("attempt to corrupt spilled pointer on stack").
static __always_inline __u64 qm_wide(__u64 x) {
    asm volatile("" : "+r"(x));
    return x;
}

// 64 bits wide (qm_wide): a class kept across the dns: lookup is spilled
// with a 64-bit store (its slot may have held a pointer of the address search).
static __always_inline __u64 qm_cross(struct qm_fslot *t, int k, __u32 x, __u32 y) {
    return qm_wide(t->cross[(t->c.base[k] + x * t->c.width[k] + y) & (QM_CROSS - 1)]);
}

// qm_cross, or `x` where the stage is the identity (skip bit k, a config
// bit: well predicted). Both results 16 bits and opaque (qm_wide), so that
// the verifier's states where the two paths join look alike and prune.
static __always_inline __u64 qm_stage(struct qm_fslot *t, __u32 skip, int k, __u64 x, __u32 y) {
    if (skip & (1u << k)) return qm_wide(x & 0xffff);
    return qm_cross(t, k, x, y);
}

// The index entry of key `a` (u32 address or u64 high half): its bucket
// in the window of QM_IDX buckets of 2^shift from `base`, else below or
// above it (a - base wraps to more than any bucket when a is below). Those
// two are read at constant offsets, each on its own path (qm_wide stops
// clang from merging them into one variable offset): a variable offset
// that is a different range on another path is refused without
// CAP_PERFMON ("pointer arithmetic with it prohibited for !root"). `b`:
// the bucket (QM_IDX or more outside the window), for a two-class entry's
// split (QM_IDX_CLASS).
#define QM_IDX_ENTRY(t, a, b)                                           \
    ({                                                                  \
        b = ((__u64)(a) - (t)->ibase) >> ((t)->ishift & 63);            \
        __u64 e_;                                                       \
        if (b < QM_IDX)                                                 \
            e_ = (t)->idx[b];                                           \
        else if ((__u64)(a) < (t)->ibase)                               \
            e_ = qm_wide((t)->idx[QM_IDX]);                             \
        else                                                            \
            e_ = qm_wide((t)->idx[QM_IDX + 1]);                         \
        (__u32)e_;                                                      \
    })

// The class in entry `e` of bucket `b` for key `a`, returned from the
// caller, where the entry holds it (one class, or two and the split).
// Two-class entries are in the window only (b below QM_IDX; masked for the
// verifier).
#define QM_IDX_CLASS(t, a, b, e)                                                                    \
    do {                                                                                            \
        __u32 st_ = ((e) >> 12) & 15;                                                               \
        if (st_ == QM_IDX_ONE) return qm_wide((e) >> 16);                                           \
        if (st_ == QM_IDX_TWO)                                                                      \
            return qm_wide((__u64)(a) < (t)->isplit[(b) & (QM_IDX - 1)] ? (e) >> 16 : (e) & 0xfff); \
    } while (0)

// One step of the search (written out: clang does not unroll a loop with
// an early exit), then QM_STEPS: at most 12, none once `step` is 0.
#define QM_STEP(starts, a)                                     \
    if (!step) goto done;                                      \
    {                                                          \
        __u32 mid = (lo + step) & (QM_MAX_INTERVALS - 1);      \
        if ((starts)[mid] <= (a)) lo = mid;                    \
        step >>= 1;                                            \
    }
#define QM_STEPS(starts, a)                                                                     \
    do {                                                                                        \
        QM_STEP(starts, a) QM_STEP(starts, a) QM_STEP(starts, a) QM_STEP(starts, a)             \
        QM_STEP(starts, a) QM_STEP(starts, a) QM_STEP(starts, a) QM_STEP(starts, a)             \
        QM_STEP(starts, a) QM_STEP(starts, a) QM_STEP(starts, a) QM_STEP(starts, a)             \
    done:;                                                                                      \
    } while (0)

// AddressIntervals.classOf: the last interval whose start is not above
// `a`. The index entry gives the first candidate and the steps (at most
// 12: the daemon pads the starts to QM_MAX_INTERVALS with all-ones, the
// padding's class the last interval's, and keeps start + 2^steps - 1
// within them). Each step halves; the loop ends early when none is left.
static __always_inline __u64 qm_addr4(struct qm_fslot *s, const int field, __u32 a) {
    struct qm_faddr4 *t = &s->a4[field];
    __u64 b;
    __u32 e = QM_IDX_ENTRY(t, a, b);
    QM_IDX_CLASS(t, a, b, e);
    __u32 lo = e & (QM_MAX_INTERVALS - 1);
    // 64 bits wide (qm_wide): spilled with a 64-bit store.
    __u64 step = qm_wide((1u << ((e >> 12) & 15)) >> 1);
    QM_STEPS(t->start, a);
    return qm_wide(t->cls[lo & (QM_MAX_INTERVALS - 1)]);
}

static __always_inline __u64 qm_addr6(struct qm_faddr6 *t, __u64 ah, __u64 al) {
    __u32 lo = t->zero & (QM_MAX_INTERVALS - 1);
#pragma unroll
    for (__u32 step = QM_MAX_INTERVALS / 2; step; step >>= 1) {
        __u32 mid = (lo + step) & (QM_MAX_INTERVALS - 1);
        __u64 sh = t->hi[mid];
        if (sh < ah || (sh == ah && t->lo[mid] <= al)) lo = mid;
    }
    return qm_wide(t->cls[lo & (QM_MAX_INTERVALS - 1)]);
}

// The class of IPv6 address ah:al in `field` (0 source, 1 destination) of
// `slot`: qm_addr6 in a global function of scalars, verified once (inlined,
// its branches, three a step, multiply the verifier's paths beyond its limit).
__noinline int qm_addr6_full(__u32 slot, __u32 field, __u64 ah, __u64 al) {
    slot &= 1;
    struct qm_fslot *s = bpf_map_lookup_elem(&qm_fslot, &slot);
    if (!s) return 0;
    // Two copies, each at a constant offset into the slot, as where it is
    // inlined (`field` a constant there).
    if (field) return qm_addr6(&s->a6[1], ah, al);
    return qm_addr6(&s->a6[0], ah, al);
}

// qm_addr6's search inlined over the starts' high halves only (one branch a
// step, as IPv4's: the verifier's paths stay few): the last start whose high
// half is not above the address's. That is the answer unless its high half
// equals the address's and its low half is above it (a prefix longer than
// /64 in the address's /64): then qm_addr6_full searches all 128 bits, a
// call (about 10 ns here) that prefixes of /64 or shorter never take.
static __always_inline __u64 qm_addr6_hi(struct qm_fslot *s, __u32 slot, const int field, const __u32 *w) {
    struct qm_faddr6 *t = &s->a6[field];
    __u64 ah = (__u64)w[0] << 32 | w[1], al = (__u64)w[2] << 32 | w[3];
    __u64 b;
    __u32 e = QM_IDX_ENTRY(t, ah, b);
    QM_IDX_CLASS(t, ah, b, e);
    __u32 lo = e & (QM_MAX_INTERVALS - 1);
    // 64 bits wide (qm_wide): spilled with a 64-bit store.
    __u64 step = qm_wide((1u << ((e >> 12) & 15)) >> 1);
    QM_STEPS(t->hi, ah);
    lo &= QM_MAX_INTERVALS - 1;
    __u64 sh = t->hi[lo];
    if (sh > ah || (sh == ah && t->lo[lo] > al)) return qm_addr6_full(slot, field, ah, al);
    return qm_wide(t->cls[lo]);
}

// FlowClassifier.classify: rule + 1, or 0. Every table but the addresses'
// in the slot's one value `t`.
static __always_inline __u32 qm_classify(struct qm_fslot *t, __u32 slot, const int v6, struct qm_fields *f,
                                         __u32 ingress) {
    __u32 p = f->has_proto ? t->proto[f->proto] : 0;
    __u32 sp = f->has_ports ? t->port[0][f->sp] : 0;
    __u32 dp = f->has_ports ? t->port[1][f->dp] : 0;
    // Where no rule names an address of the packet's family (one interval),
    // its class is in the config: no lookup, no search.
    __u32 s, d;
    const int fs = v6 ? 2 : 0;
    if (t->c.n[fs] <= 1 && t->c.n[fs + 1] <= 1) {
        s = t->c.addr0[fs];
        d = t->c.addr0[fs + 1];
    } else if (!v6) {
        s = t->c.n[0] <= 1 ? t->c.addr0[0] : qm_addr4(t, 0, f->s[3]);
        d = t->c.n[1] <= 1 ? t->c.addr0[1] : qm_addr4(t, 1, f->d[3]);
    } else {
        // The high halves searched inline (qm_addr6_hi); the full 128-bit
        // searches in a global function, verified once: inlined, their
        // branches (three a step) multiply the verifier's paths beyond its limit.
        s = t->c.n[2] <= 1 ? t->c.addr0[2] : qm_addr6_hi(t, slot, 0, f->s);
        d = t->c.n[3] <= 1 ? t->c.addr0[3] : qm_addr6_hi(t, slot, 1, f->d);
        // Masked after the paths join: the same range on each, so that the
        // verifier's states there match and prune.
        s = qm_launder(s) & 0xffff;
        d = qm_launder(d) & 0xffff;
    }
    // A rule's chain is stages 0 -> 1 -> 4 -> 5: the identity ones (sport,
    // arrival with one class) skipped, or 0 and 5 fused (QM_FUSE).
    const __u32 skip = t->c.skip;
    // The address stage, unless folded into the varying field's classes
    // (EBPFFlowTables.swift: its classes are then the stage's results).
    const __u32 fold = (skip >> (v6 ? QM_FOLD6 : QM_FOLD4)) & 3;
    __u64 ad;
    if (fold == 1)
        ad = qm_wide(s & 0xffff);
    else if (fold == 2)
        ad = qm_wide(d & 0xffff);
    else
        ad = qm_stage(t, skip, 2, s, d);
    if (t->c.dns) {
        // The destination's learned mask (0: not learned) → its dns class.
        __u32 *m;
        if (v6) {
            struct qm_dkey6 key = {{f->d[0], f->d[1], f->d[2], f->d[3]}};
            m = bpf_map_lookup_elem(&qm_fdns6, &key);
        } else {
            __u32 key = f->d[3];
            m = bpf_map_lookup_elem(&qm_fdns4, &key);
        }
        __u32 dc = t->cross[(t->c.dclass + (m ? *m & 0xfff : 0)) & (QM_CROSS - 1)];
        ad = t->cross[(t->c.dbase + ad * t->c.dwidth + dc) & (QM_CROSS - 1)];
    }
    if (skip & QM_FUSE)
        return t->cross[(t->c.fbase + (p * t->c.width[0] + dp) * t->c.width[5] + ad) & (QM_CROSS - 1)];
    __u64 po = qm_stage(t, skip, 1, qm_stage(t, skip, 0, p, dp), sp);
    __u64 ar = qm_stage(t, skip, 3, ingress, t->dscp[f->dscp & 63]);
    return qm_stage(t, skip, 5, qm_stage(t, skip, 4, po, ar), ad);
}

// FlowKey.hash32's constants (odd; from xxHash and MurmurHash3).
#define QM_HK0 0x9e3779b97f4a7c15ull
#define QM_HK1 0xc2b2ae3d27d4eb4full
#define QM_HK2 0x165667b19e3779f9ull
#define QM_HK3 0xd6e8feb86659fd93ull
#define QM_HK4 0xff51afd7ed558ccdull
#define QM_HK5 0xc4ceb9fe1a85ec53ull

// FlowKey: the two ends ordered (address, then port), as five u64 in the
// words' memory order (w[2i] low), and its slot: FlowKey.hash32, a sum of
// the five words' products with odd constants (independent multiplies, not
// a chain of ten as FNV-1a's), folded by xorshift-multiply. For IPv4 the
// zero words drop out of the sum. IPv6 addresses are read and swapped as
// u64 pairs (qm_fields is 8-aligned): in memory the host-order words are
// already the key's.
static __always_inline __u32 qm_flow_key(struct qm_fields *f, const int v6, __u64 *k) {
    // 64 bits wide (qm_wide): spilled with 64-bit stores.
    __u64 sp = qm_wide(f->sp), dp = qm_wide(f->dp);
    __u64 w9 = qm_wide((v6 ? 0x100 : 0) | (f->has_proto ? f->proto : 0));
    int swap;
    __u64 x;
    if (!v6) {
        __u32 a = f->s[3], b = f->d[3];
        swap = b != a ? b < a : dp < sp;
        __u32 m = -(__u32)swap;
        __u32 y = (a ^ b) & m, lo = a ^ y, hi = b ^ y;
        __u32 w8 = (__u32)(sp << 16 | dp) ^ (((__u32)(sp ^ dp) * 0x10001u) & m);
        k[0] = 0;
        k[1] = (__u64)lo << 32;
        k[2] = 0;
        k[3] = (__u64)hi << 32;
        k[4] = (__u64)w9 << 32 | w8;
        x = k[1] * QM_HK1 + k[3] * QM_HK3 + k[4] * QM_HK4;
    } else {
        int decided = 0;
        swap = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (!decided && f->d[i] != f->s[i]) {
                swap = f->d[i] < f->s[i];
                decided = 1;
            }
        }
        if (!decided) swap = dp < sp;
        // Swapped by masks: a select between f->s and f->d becomes a
        // pointer moved by a register, refused without CAP_PERFMON.
        __u64 m = -(__u64)swap;
        const __u64 *s = (const __u64 *)f->s, *d = (const __u64 *)f->d;
        __u64 y0 = (s[0] ^ d[0]) & m, y1 = (s[1] ^ d[1]) & m;
        __u32 w8 = (__u32)(sp << 16 | dp) ^ (((__u32)(sp ^ dp) * 0x10001u) & (__u32)m);
        k[0] = s[0] ^ y0;
        k[1] = s[1] ^ y1;
        k[2] = d[0] ^ y0;
        k[3] = d[1] ^ y1;
        k[4] = (__u64)w9 << 32 | w8;
        x = k[0] * QM_HK0 + k[1] * QM_HK1 + k[2] * QM_HK2 + k[3] * QM_HK3 + k[4] * QM_HK4;
    }
    x ^= x >> 32;
    x *= QM_HK5;
    return (__u32)(x >> 32) & (QM_FLOW_SLOTS - 1);
}

static __always_inline int qm_same_key(struct qm_flow *e, const __u64 *k) {
    const __u64 *q = (const __u64 *)e->w;
    return ((q[0] ^ k[0]) | (q[1] ^ k[1]) | (q[2] ^ k[2]) | (q[3] ^ k[3]) | (q[4] ^ k[4])) == 0;
}

// PacketFlow.fields where qm_parse_fast cannot read them in place: a global
// function, so the verifier checks the general parser once, not in each of
// mark_ip's inlined copies. `where`: off | v6 << 16. 1 when it filled `f`.
// No `!skb` test: the verifier passes a global function's context argument
// as the program's (never NULL), and without CAP_PERFMON refuses comparing it.
__noinline int qm_parse_slow(struct __sk_buff *skb, struct qm_fields *f, __u32 where) {
    if (!f) return 0;
    // Two copies with v6 a constant: the verifier then ties the header's
    // buffer length to the family.
    if (where >> 16) return qm_parse(skb, where & 0xffff, 1, f);
    return qm_parse(skb, where & 0xffff, 0, f);
}

// FlowRuntime.rule: the first rule the packet matches (recorded for its
// connection when the rule says so), else the rule its connection matched;
// its counters (packets, and `bytes` of IP packet) counted. Returns 0 for no
// rule, else rule + 1 | the rule's class x color cell for ingress policy
// `in` << 16. `who`: slot | in << 2 | ingress class << 8. Inlined in
// mark_ip's untagged copy, in qm_step4/6 (called) for the others.
// One copy per family: with `v6` a constant, no pointer moves by a
// family-dependent offset, which the verifier refuses without CAP_PERFMON
// when it is a constant on one path and not on another.
static __always_inline int qm_rule(struct qm_fields *f, __u32 who, __u32 bytes, const int v6, const int keep_key) {
    if (!f) return 0;  // (a global function's pointer argument may be NULL)
    __u32 slot = who & 1, in = (who >> 2) & (QM_MAX_IN - 1), ingress = who >> 8;
    struct qm_fslot *t = bpf_map_lookup_elem(&qm_fslot, &slot);
    if (!t) return 0;
    __u32 r = qm_classify(t, slot, v6, f, ingress);
    // The rule's byte for this ingress policy: its cell | QM_R_CONN. With
    // QM_RCELL the cell came with r, and QM_R_CONN stands for `track`.
    __u32 rb;
    if (t->c.skip & QM_RCELL) {
        rb = r >> QM_RCELL_SHIFT | QM_R_CONN;
        r &= (1u << QM_RCELL_SHIFT) - 1;
    } else {
        rb = r ? QM_RULE_BYTE(t, r, in) : 0;
    }
    // The same ranges on both ways: the verifier's states where they join
    // look alike and prune.
    r = qm_launder(r) & 0xffff;
    rb = qm_launder(rb) & 0xff;
    // The connection table only when a rule keeps its connection and the
    // matched rule (if any) does (not `connection: false`).
    if (t->c.track && (!r || (rb & QM_R_CONN))) {
        __u64 k[5];
        __u32 key = qm_flow_key(f, v6, k);
        if (keep_key) {
#pragma unroll
            for (int i = 0; i < 5; i++) f->key[i] = k[i];
            f->khash = 1ull << 32 | key;
        }
        struct qm_flow *e = bpf_map_lookup_elem(&qm_flows, &key);
        if (e) {
            // Connection first (ConnectionTable.resolve): the rule the
            // connection recorded wins over a `connection: true` rule this
            // packet matches; a matched rule is recorded only for a
            // connection without one (or whose slot holds another flow).
            __u32 epoch = t->c.epoch & 0xffff;
            __u32 tag = e->tag;
            if ((tag & 0xffff) != 0 && tag >> 16 == epoch && qm_same_key(e, k)) {
                // 64 bits wide (qm_wide): spilled with a 64-bit store.
                r = qm_wide(tag & 0xffff);
                rb = QM_RULE_BYTE(t, r, in);
            } else if (r) {
                // Not atomic: two CPUs writing one slot at once for two
                // flows may leave a mixed key, which matches no packet of either.
                __u64 *q = (__u64 *)e->w;
#pragma unroll
                for (int i = 0; i < 5; i++) q[i] = k[i];
                e->tag = r | epoch << 16;
            }
        }
    }
    if (!r) return 0;
    // Download shaping classifies before routing and does not count: the
    // egress classifier counts the same packet when it leaves. (keep_key is a
    // constant: the inlined copy has no such branch.)
    if (!(keep_key && (who & QM_W_NOCOUNT))) {
        __u32 rk = slot * QM_MAX_RULES + ((r - 1) & (QM_MAX_RULES - 1));
        struct qm_rcount *rc = bpf_map_lookup_elem(&qm_frcount, &rk);
        if (!rc) return 0;
        rc->packets += 1;  // per-CPU: no atomic needed
        rc->bytes += bytes;
    }
    // A compare, not `% QM_CELLS` (a multiply, shift, multiply and subtract
    // on the hit's dependency chain: the qm_table index waits for it). The
    // daemon writes cells below QM_CELLS; the guard keeps a bad one in the pair.
    __u32 cell = rb & ~QM_R_CONN;
    if (cell >= QM_CELLS) cell = 0;
    return (r & 0xffff) | cell << 16;
}

// Flow behaviour (`classify.flows`; QoSMapCore/FlowBehaviour.swift has the
// same state machine and table, docs/CLASSIFY.md the semantics):
//   qm_bconf   ARRAY[16] struct qm_bconf per slot and service class (key
//              slot << 3 | class): that class's thresholds, the bulk and
//              interactive cells, its apply_to bit when it is checked, the
//              slot's epoch.
//   qm_behave  ARRAY[16384] struct qm_bset: FlowBehaviourTable's 65,536
//              flows, 4-way set associative, the set by FlowKey.hash32
//              (qm_flow_key), the same victim (the first free way, else the
//              least recent second, the lowest way on a tie): both
//              datapaths track and evict the same flows.
//   qm_bcount  PERCPU_ARRAY[4] flows tracked, evicted, demoted, promoted.
#define QM_GEN_BEHAVE 4u  // in qm_gen: the active slot has flow behaviour
#define QM_B_BULK 1u
#define QM_B_PPS 2u
#define QM_B_BYTES 4u
#define QM_B_INTER 8u
#define QM_B_WAYS 4
#define QM_B_SETS 16384     // FlowBehaviourTable.capacity / ways
#define QM_B_USED 0x100u    // in qm_bway.last: the way holds a flow
#define QM_NS 1000000000ull

struct qm_bconf {
    __u64 bytes;
    __u64 test_now;  // nonzero: the time (BPF_PROG_TEST_RUN cannot set the clock)
    __u32 pps;
    __u32 hold;
    __u32 max_avg;
    __u32 epoch;
    __u8 bulk_cell;
    __u8 inter_cell;
    __u8 apply_to;  // one bit per class
    __u8 flags;
    __u32 pad;
};

// One flow: its key (qm_flow_key's words) and FlowBehaviourState's fields.
struct qm_bway {
    __u64 k[5];
    __u32 second;
    __u32 packets;
    __u64 bytes;
    __u32 bulk_until;
    __u32 avg;
    __u32 epoch;  // the load's: a way of another epoch is free
    __u32 last;   // the last verdict | QM_B_USED
    // The clock (ns) at which `second` began: a packet within QM_NS of it is
    // in the same second, found without the 64-bit division (0 with second 0).
    __u64 since;
};

struct qm_bset {
    struct qm_bway way[QM_B_WAYS];
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 16);
    __type(key, __u32);
    __type(value, struct qm_bconf);
} qm_bconf SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, QM_B_SETS);
    __type(key, __u32);
    __type(value, struct qm_bset);
} qm_behave SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 4);
    __type(key, __u32);
    __type(value, __u64);
} qm_bcount SEC(".maps");

static __always_inline void qm_bcount_add(__u32 i) {
    __u64 *c = bpf_map_lookup_elem(&qm_bcount, &i);
    if (c) *c += 1;
}

// The cell (1 + Treatment.cellIndex) flow behaviour gives a packet of class
// cell `cell` (0: keep it), `len` bytes from the IP header on, `segs` GSO
// segments. who = cell | slot << 8 | v6 << 16. Inlined in qm_step4/6 only
// (global functions: verified once, not in each of mark_ip's copies).
static __always_inline int qm_behaviour(struct qm_fields *fp, __u32 len, __u32 segs, __u32 who) {
    __u32 v6 = (who >> 16) & 1, slot = (who >> 8) & 1, cell = who & 0xff;
    // The key (slot << 3 | class) stored 64 bits wide (qm_wide; the map
    // reads its low 4 bytes): clang put it in a stack slot that had held a
    // spilled pointer, and a 4-byte store there is refused without
    // CAP_PERFMON ("attempt to corrupt spilled pointer on stack").
    __u32 class = (cell % 24) / 3;
    __u64 key = qm_wide(slot << 3 | class);
    struct qm_bconf *c = bpf_map_lookup_elem(&qm_bconf, &key);
    if (!c || !((c->apply_to >> class) & 1)) return 0;
    struct qm_fields *f = fp;
    if (!f || !f->ok) return 0;  // fields mark_ip could not read: not a flow
    // The key qm_rule4/6 computed, else computed here (the same hash).
    if (!f->khash) f->khash = 1ull << 32 | (v6 ? qm_flow_key(f, 1, f->key) : qm_flow_key(f, 0, f->key));
    const __u64 *k = f->key;
    __u32 set = (__u32)f->khash & (QM_B_SETS - 1);
    struct qm_bset *b = bpf_map_lookup_elem(&qm_behave, &set);
    if (!b) return 0;
    __u32 epoch = c->epoch;
    // FlowBehaviourTable.update's walk: the flow's way, else the first free
    // way, else the least recent (the lowest on a tie). Not atomic: two
    // CPUs on one set at once may lose a count, or, taking one way for two
    // flows, leave a mixed key that matches neither (a new entry next time).
    // 64 bits wide (qm_wide): clang spills them with 64-bit stores (see the walk).
    __s64 hit = -1, victim = -1;
    __u64 vfree = 0;
#pragma unroll
    for (int i = 0; i < QM_B_WAYS; i++) {
        struct qm_bway *w = &b->way[i];
        // One 64-bit difference, one branch (opaque: clang neither splits it
        // into 32-bit flags nor spills those into a pointer's stack slot,
        // which the verifier refuses without CAP_PERFMON).
        __u64 d = qm_wide((w->k[0] ^ k[0]) | (w->k[1] ^ k[1]) | (w->k[2] ^ k[2]) | (w->k[3] ^ k[3]) |
                          (w->k[4] ^ k[4]) | ((w->last & QM_B_USED) ^ QM_B_USED) | (w->epoch ^ epoch));
        if (d == 0) {
            hit = qm_wide(i);
            break;
        }
    }
    if (hit < 0) {
        __u64 vsec = 0;
#pragma unroll
        for (int i = 0; i < QM_B_WAYS; i++) {
            struct qm_bway *w = &b->way[i];
            if (qm_wide(((w->last & QM_B_USED) ^ QM_B_USED) | (w->epoch ^ epoch))) {
                victim = qm_wide(i);
                vfree = qm_wide(1);
                break;
            }
            __u64 ws = qm_wide(w->second);
            if (victim < 0 || ws < vsec) {
                victim = qm_wide(i);
                vsec = ws;
            }
        }
    }
    // Plus a 0 the verifier cannot see: an index that is a constant on some
    // paths and not on others is refused without CAP_PERFMON ("tried to add
    // from different maps, paths or scalars").
    __u32 idx = ((__u32)(hit >= 0 ? hit : victim) + (qm_launder(epoch) - epoch)) & (QM_B_WAYS - 1);
    struct qm_bway *st = &b->way[idx];
    if (hit < 0) {
        if (!vfree) qm_bcount_add(1);
        qm_bcount_add(0);
#pragma unroll
        for (int i = 0; i < 5; i++) st->k[i] = k[i];
        st->second = 0;
        st->since = 0;
        st->packets = 0;
        st->bytes = 0;
        st->bulk_until = 0;
        st->avg = 0;
        st->epoch = epoch;
        st->last = QM_B_USED;
    }
    __u64 now = c->test_now ? c->test_now : bpf_ktime_get_coarse_ns();
    // now / QM_NS only when `now` left the way's second (a 64-bit division
    // costs tens of cycles): the same integer second either way.
    // 64 bits wide (qm_wide), as `hold` below: spilled across the counter
    // helper calls, and a 32-bit spill into a slot that held a pointer is
    // refused without CAP_PERFMON.
    __u64 sec = qm_wide(st->second);
    if (now - st->since >= QM_NS) {
        __u64 q = now / QM_NS;
        sec = qm_wide((__u32)q);
        st->since = q * QM_NS;
    }
    if (!segs) segs = 1;
    // 64 bits wide (qm_wide): spilled with a 64-bit store (its slot may have
    // held a pointer; a 32-bit store there is refused without CAP_PERFMON).
    __u64 hold = qm_wide(c->flags & QM_B_BULK ? c->hold : 0);
    if (sec != st->second) {
        if ((__u32)(sec - st->second) > hold) st->bytes = 0;
        st->second = (__u32)sec;
        st->packets = 0;
    }
    __u32 p = st->packets + segs;
    st->packets = p < st->packets ? 0xffffffffu : p;
    st->bytes += len;
    __u32 size = segs == 1 ? len : len / segs;
    if (!size) size = 1;
    st->avg = st->avg ? (st->avg * 7 + size) >> 3 : size;
    __u32 v = 0;
    if (c->flags & QM_B_BULK) {
        if ((c->flags & QM_B_PPS) && st->packets > c->pps) st->bulk_until = sec + hold + 1;
        if ((c->flags & QM_B_BYTES) && st->bytes > c->bytes) st->bulk_until = sec + hold + 1;
        if (st->bulk_until && sec < st->bulk_until) v = 1;
    }
    if (!v && (c->flags & QM_B_INTER) && st->avg <= c->max_avg) v = 2;
    if (v != (st->last & 3)) {
        if (v == 1) qm_bcount_add(2);
        if (v == 2) qm_bcount_add(3);
        st->last = v | QM_B_USED;
    }
    // Laundered: else clang adds a per-path offset (bulk_cell or
    // inter_cell) to the map value pointer, refused without CAP_PERFMON.
    if (v == 1) return 1 + qm_launder(c->bulk_cell) % 24;
    if (v == 2) return 1 + qm_launder(c->inter_cell) % 24;
    return 0;
}

#define QM_W_BEHAVE 0x80u  // in qm_step's `who`: flow behaviour is on
#define QM_W_RULES 0x40u  // in qm_step's `who`: apply the flow rules (on, and the fields read)

// The copies of mark_ip that do not inline the rules make this one call
// for rules and flow behaviour (one call, not two: a BPF-to-BPF call costs
// several ns here): the rule (qm_rule, if `who` has QM_W_RULES), the entry
// by rule or else `trust` (the index by DSCP or carried PCP), and on its
// cell the behaviour step (if `who` has QM_W_BEHAVE). Returns the qm_table
// index to apply. `who`: qm_rule's | QM_W_*; `pair`: the (slot, in, out)
// entries' base | GSO segments << 16.
static __always_inline __u32 qm_step(struct qm_fields *f, __u32 who, __u32 bytes, __u32 trust, __u32 pair,
                                     const int v6) {
    __u32 index = trust & 0xffff, base = pair & 0xffff, slot = who & 1;
    if (!f) return index;
    if (who & QM_W_RULES) {
        __u32 r = qm_rule(f, who, bytes, v6, 1);
        if (r) index = base + QM_RULE_BASE + (r >> 16);  // qm_rule: a cell below QM_CELLS
    }
    if (!(who & QM_W_BEHAVE)) return index;
    struct qm_entry *e = bpf_map_lookup_elem(&qm_table, &index);
    if (!e) return index;  // none in mark_ip either
    __u32 b = qm_behaviour(f, bytes, pair >> 16, (e->cell % 24) | slot << 8 | v6 << 16);
    if (b) index = base + QM_RULE_BASE + (b - 1) % 24;
    return index;
}

__noinline int qm_step4(struct qm_fields *f, __u32 who, __u32 bytes, __u32 trust, __u32 pair) {
    return qm_step(f, who, bytes, trust, pair, 0);
}

__noinline int qm_step6(struct qm_fields *f, __u32 who, __u32 bytes, __u32 trust, __u32 pair) {
    return qm_step(f, who, bytes, trust, pair, 1);
}

struct vlan_hdr_qm {
    __be16 tci;
    __be16 proto;
};

// Marks the IP packet whose header starts at `off` (a constant in each
// inlined copy: without CAP_PERFMON the verifier refuses packet pointers
// moved by a register, however bounded). `inline_rules`: the flow-rule code
// inlined (the untagged copy without flow behaviour) rather than called
// (qm_step4, qm_step6, with the behaviour step: the others). A BPF-to-BPF
// call cost about 10 ns a packet here (tools/bench/ebpf-rules; with the
// kernel's return thunks every return goes through one), a third of the
// rules' budget; inlined in all four copies, the program exceeds the
// verifier's 1M-instruction limit.
static __always_inline int mark_ip(struct __sk_buff *skb, const __u32 off, __be16 proto, const int inline_rules,
                                   __u32 g) {
    void *data = (void *)(long)skb->data;
    void *end = (void *)(long)skb->data_end;
    int v6;
    if (proto == bpf_htons(ETH_P_IP)) v6 = 0;
    else if (proto == bpf_htons(ETH_P_IPV6)) v6 = 1;
    else return TC_ACT_OK;

    __u8 *hdr = data + off;
    // IPv4 needs the checksum at bytes 10-11 too. A header outside the
    // linear data (rare on egress) is pulled in once.
    if ((void *)(hdr + 12) > end) {
        if (bpf_skb_pull_data(skb, off + 12) < 0) {
            count(QM_MALFORMED_SLOT);
            return TC_ACT_OK;
        }
        data = (void *)(long)skb->data;
        end = (void *)(long)skb->data_end;
        hdr = data + off;
    }
    if ((void *)(hdr + 12) > end || (hdr[0] >> 4) != (v6 ? 6 : 4) ||
        (!v6 && (hdr[0] & 0x0f) < 5)) {
        count(QM_MALFORMED_SLOT);
        return TC_ACT_OK;
    }
    __u8 h0 = hdr[0], h1 = hdr[1];
    __u8 tos = v6 ? (__u8)((h0 << 4) | (h1 >> 4)) : h1;
    __u8 dscp = tos >> 2;

    __u32 slot = g & 1;
    __u32 in_if = skb->ingress_ifindex, out_if = skb->ifindex;
    // in is 0 without an ingress interface, but a 0 the verifier cannot
    // see (qm_launder(g) - g): a constant on one path and not on another
    // would have the verifier walk the inlined rule code once for each.
    __u32 in = qm_launder(g) - g, out = 0;
    if (in_if) {
        struct qm_policy *p = policy(&qm_ingress, &qm_ingress_hash, in_if);
        if (p) in = p->slot[slot];  // the flow rules' ingress class in the high half
    }
    struct qm_policy *q = policy(&qm_egress, &qm_egress_hash, out_if);
    if (q) out = q->slot[slot];
    __u32 ingress_class = in >> 16;
    in &= 0xffff;
    if (in >= QM_MAX_IN || out >= QM_MAX_OUT) return TC_ACT_OK;
    __u32 index = ((slot * QM_MAX_IN + in) * QM_MAX_OUT + out) * QM_PER_PAIR + dscp;
    __u32 r = 0;
    // Read once for the rules and flow behaviour (neither on: not read).
    struct qm_fields f;
    int have = 0;
    if (g & (QM_GEN_RULES | QM_GEN_BEHAVE)) {
        if (!inline_rules) {
            __builtin_memset(f.key, 0, sizeof f.key);
            f.khash = 0;
        }
        have = qm_parse_fast(skb, off, v6, &f);
        if (!have) {
            // Every byte written: without CAP_PERFMON the verifier refuses
            // passing stack it cannot prove initialised.
            __builtin_memset(&f, 0, sizeof f);
            have = qm_parse_slow(skb, &f, off | v6 << 16);
        }
    } else if (!inline_rules) {
        // Written anyway: without CAP_PERFMON the verifier also walks the
        // mispredicted branch into qm_step's call below, and refuses
        // unwritten stack passed to a global function even there.
        __builtin_memset(&f, 0, sizeof f);
    }
    if ((g & QM_GEN_RULES) && inline_rules) {
        if (have) {
            __u32 who = slot | in << 2 | ingress_class << 8, bytes = skb->len - off;
            r = v6 ? qm_rule(&f, who, bytes, 1, 0) : qm_rule(&f, who, bytes, 0, 0);
            if (r) index = index - dscp + QM_RULE_BASE + (r >> 16);  // qm_rule: a cell below QM_CELLS
        }
    }
    const __u32 carry_mask = QM_READ(qm_config.carry_mask);
    if (carry_mask) {
        __u32 carried = (skb->mark & carry_mask) >> (QM_READ(qm_config.carry_shift) & 31);
        if (carried & QM_CARRIED) {
            if (!r) index = index - dscp + QM_PCP_BASE + (carried & 0xf);
            skb->mark &= ~carry_mask;
        }
    }
    // The other copies: the rules (not applied above) and flow behaviour in
    // one call (qosmap_egress takes the untagged one of these when flow
    // behaviour is on).
    if (!inline_rules && (g & (QM_GEN_RULES | QM_GEN_BEHAVE))) {
        __u32 who = slot | in << 2 | ingress_class << 8 | ((g & QM_GEN_RULES) && have ? QM_W_RULES : 0) |
                    (g & QM_GEN_BEHAVE ? QM_W_BEHAVE : 0);
        __u32 pair = ((slot * QM_MAX_IN + in) * QM_MAX_OUT + out) * QM_PER_PAIR | (skb->gso_segs & 0xffff) << 16;
        index = v6 ? qm_step6(&f, who, skb->len - off, index, pair) : qm_step4(&f, who, skb->len - off, index, pair);
    }
    struct qm_entry *e = bpf_map_lookup_elem(&qm_table, &index);
    if (!e) return TC_ACT_OK;

    __u32 outcome = QM_UNCHANGED;
    if ((e->flags & QM_F_DSCP) && e->dscp != dscp) {
        __u8 ntos = (__u8)((e->dscp << 2) | (tos & 3));  // ECN kept
        // The verifier forgets packet bounds across helper calls (the map
        // lookups): load the pointers again.
        data = (void *)(long)skb->data;
        end = (void *)(long)skb->data_end;
        hdr = data + off;
        if ((void *)(hdr + 12) > end) return TC_ACT_OK;
        if (v6) {
            hdr[0] = (h0 & 0xf0) | (ntos >> 4);
            hdr[1] = (__u8)((ntos << 4) | (h1 & 0x0f));
        } else {
            // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), m the 16-bit word of
            // version/IHL and TOS. DSCP is in no L4 pseudo-header.
            __u16 m = (__u16)((h0 << 8) | h1), m2 = (__u16)((h0 << 8) | ntos);
            __u16 hc = (__u16)((hdr[10] << 8) | hdr[11]);
            __u32 sum = (__u16)~hc + (__u16)~m + m2;
            sum = (sum & 0xffff) + (sum >> 16);
            sum = (sum & 0xffff) + (sum >> 16);
            __u16 nc = (__u16)~sum;
            hdr[1] = ntos;
            hdr[10] = nc >> 8;
            hdr[11] = nc & 0xff;
        }
        outcome = QM_REWRITTEN;
    }
    if (e->flags & QM_F_MARK) skb->mark = (skb->mark & ~e->mark_mask) | e->mark_value;
    if (e->flags & QM_F_PRIORITY) {
        skb->priority = e->priority;
        // The color (Treatment.cellIndex % 3: green 0, yellow 1, red 2) for
        // a GRED leaf, which picks its drop precedence from skb->tc_index.
        // Written as the class id: on TC_ACT_OK the kernel sets tc_index to
        // the classifier's minor (tc_classid in direct-action mode), over
        // what the program wrote into tc_index itself.
        skb->tc_classid = e->cell % 3;
    }
    // A rule's cell is its entry's (EBPFTables writes the entry at
    // QM_RULE_BASE + cell with that cell): taken from r, the counter does
    // not wait for the entry's load. Else a compare, not `% QM_CELLS` (a
    // multiply, shift, multiply and subtract between the entry and the
    // counter's lookup, on every packet's chain). The daemon writes cells
    // below QM_CELLS; the guard keeps a bad one in the map.
    __u32 cell;
    if (r) {
        cell = r >> 16;  // qm_rule: below QM_CELLS
    } else {
        cell = e->cell;
        if (cell >= QM_CELLS) cell = 0;
    }
    count(cell * QM_OUTCOMES + outcome);
    return TC_ACT_OK;
}

SEC("tc")
int qosmap_egress(struct __sk_buff *skb) {
    // Direct packet access: no helper call to read or write the two bytes
    // that hold DSCP. (tc programs that write packet data get the kernel's
    // unclone prologue, so a cloned skb is made private first.)
    void *data = (void *)(long)skb->data;
    void *end = (void *)(long)skb->data_end;
    __be16 proto = skb->protocol;
    // A tag the driver did not take into skb->vlan_tci is in the data; at
    // most two (QinQ). skb->protocol is then the outer tag's TPID.
    // The generation read once here (mark_ip's copies take it).
    __u32 g = QM_READ(qm_gen);
    if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD)) {
        // Flow behaviour: the copy that calls the rules and the behaviour
        // step (qm_step4/6). The behaviour step keeps the fields live until
        // after the rules, which in the inlined rule code multiplies the
        // verifier's states past its 1M-instruction limit; called, the
        // rules are verified once.
        if (g & QM_GEN_BEHAVE) return mark_ip(skb, ETH_HLEN, proto, 0, g);
        return mark_ip(skb, ETH_HLEN, proto, 1, g);
    }
    struct vlan_hdr_qm *v = data + ETH_HLEN;
    if ((void *)(v + 2) > end) {
        if ((void *)(v + 1) > end) return TC_ACT_OK;
        return v->proto == bpf_htons(ETH_P_8021Q) || v->proto == bpf_htons(ETH_P_8021AD)
                   ? TC_ACT_OK
                   : mark_ip(skb, ETH_HLEN + 4, v->proto, 0, g);
    }
    if (v[0].proto != bpf_htons(ETH_P_8021Q) && v[0].proto != bpf_htons(ETH_P_8021AD))
        return mark_ip(skb, ETH_HLEN + 4, v[0].proto, 0, g);
    return mark_ip(skb, ETH_HLEN + 8, v[1].proto, 0, g);
}


// Download shaping (`queues.ingress-rate`), per ingress ifindex: the IFB
// device that holds the interface's download queues (for the record: the
// redirect is qosmapd's u32 filter with act_mirred, the next priority at
// this hook, since before Linux 6.4 or so an IFB drops what bpf_redirect
// sends it), and the skb priority of each service class there
// (EgressQueues.skbPriority).
struct qm_shape {
    __u32 ifb;
    __u32 prio[8];
};

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 256);
    __type(key, __u32);
    __type(value, struct qm_shape);
} qm_shape SEC(".maps");

// The cell (class * 3 + color) of a packet arriving on skb->ifindex, before routing:
// the interface's ingress policy (trust and domain; the carried 802.1p tag
// for trust 8021p), then the flow rules and the connections they keep, as
// qosmap_egress decides it, but without flow behaviour (which counts a flow
// once, at egress) and without counting rules. The pair's egress policy is
// 0: the class does not depend on it. `off` is a constant in each copy.
static __always_inline __u32 qm_shape_cell(struct __sk_buff *skb, const __u32 off, __be16 proto,
                                            __u32 carried) {
    int v6;
    if (proto == bpf_htons(ETH_P_IP)) v6 = 0;
    else if (proto == bpf_htons(ETH_P_IPV6)) v6 = 1;
    else return 0;
    void *data = (void *)(long)skb->data;
    void *end = (void *)(long)skb->data_end;
    __u8 *hdr = data + off;
    if ((void *)(hdr + 2) > end || (hdr[0] >> 4) != (v6 ? 6 : 4)) return 0;
    __u8 tos = v6 ? (__u8)((hdr[0] << 4) | (hdr[1] >> 4)) : hdr[1];
    __u32 g = QM_READ(qm_gen), slot = g & 1, in = 0;
    struct qm_policy *p = policy(&qm_ingress, &qm_ingress_hash, skb->ifindex);
    if (p) in = p->slot[slot];
    __u32 ingress_class = in >> 16;
    in &= 0xffff;
    if (in >= QM_MAX_IN) return 0;
    __u32 base = (slot * QM_MAX_IN + in) * QM_MAX_OUT * QM_PER_PAIR;
    __u32 index = base + ((carried & QM_CARRIED) ? QM_PCP_BASE + (carried & 0xf) : (__u32)(tos >> 2));
    if (g & QM_GEN_RULES) {
        struct qm_fields f;
        __builtin_memset(&f, 0, sizeof f);
        int have = qm_parse_fast(skb, off, v6, &f);
        if (!have) {
            __builtin_memset(&f, 0, sizeof f);
            have = qm_parse_slow(skb, &f, off | v6 << 16);
        }
        if (have) {
            __u32 who = slot | in << 2 | ingress_class << 8 | QM_W_RULES | QM_W_NOCOUNT;
            index = v6 ? qm_step6(&f, who, skb->len - off, index, base) : qm_step4(&f, who, skb->len - off, index, base);
        }
    }
    struct qm_entry *e = bpf_map_lookup_elem(&qm_table, &index);
    if (!e) return 0;
    return e->cell % QM_CELLS;  // Treatment.cellIndex: class * 3 + color
}

// Trust 802.1p: the tag's PCP and DEI into skb->mark's carry bits. The tag
// is in skb->vlan_tci when the receive path took it out of the data (it
// always does before tc ingress, unless a driver left it), else in the data.
// Returns the carried bits (0: none).
static __always_inline __u32 qm_carry(struct __sk_buff *skb) {
    const __u32 carry_mask = QM_READ(qm_config.carry_mask);
    if (!carry_mask) return 0;
    __u32 tci, s_tag;
    if (skb->vlan_present) {
        tci = skb->vlan_tci;
        s_tag = skb->vlan_proto == bpf_htons(ETH_P_8021AD);
    } else if (skb->protocol == bpf_htons(ETH_P_8021Q) || skb->protocol == bpf_htons(ETH_P_8021AD)) {
        void *data = (void *)(long)skb->data;
        void *end = (void *)(long)skb->data_end;
        struct vlan_hdr_qm *v = data + ETH_HLEN;
        if ((void *)(v + 1) > end) return 0;
        tci = bpf_ntohs(v->tci);
        s_tag = skb->protocol == bpf_htons(ETH_P_8021AD);
    } else {
        // Untagged: no carry, so egress uses the entries by DSCP, which for
        // a trust-8021p policy hold the untrusted fallback.
        skb->mark &= ~carry_mask;
        return 0;
    }
    // Only an S-tag's DEI marks drop eligibility (a C-tag's bit is the old CFI).
    __u32 carried = QM_CARRIED | ((tci >> 13) & 7) << 1 | (s_tag ? (tci >> 12) & 1 : 0);
    __u32 shift = QM_READ(qm_config.carry_shift) & 31;
    skb->mark = (skb->mark & ~carry_mask) | ((carried << shift) & carry_mask);
    return carried;
}

// clsact ingress of interfaces that trust 802.1p (the carry above) or shape
// their download: the packet gets its class's skb priority and goes on
// (TC_ACT_UNSPEC) to qosmapd's mirred filter, which sends it to the
// interface's IFB, whose queues it leaves by; the IFB hands it back to this
// interface's receive path, past tc (tc_skip_classify), so it is routed and
// marked at egress as any other.
SEC("tc")
int qosmap_ingress(struct __sk_buff *skb) {
    __u32 carried = qm_carry(skb);
    __u32 ifindex = skb->ifindex;
    struct qm_shape *sh = bpf_map_lookup_elem(&qm_shape, &ifindex);
    if (!sh) return TC_ACT_OK;
    __u32 c;
    __be16 proto = skb->protocol;
    if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
        // A tag the driver left in the data (one; QinQ's inner packet is BE here).
        void *data = (void *)(long)skb->data;
        void *end = (void *)(long)skb->data_end;
        struct vlan_hdr_qm *v = data + ETH_HLEN;
        c = (void *)(v + 1) > end ? 0 : qm_shape_cell(skb, ETH_HLEN + 4, v->proto, carried);
    } else {
        c = qm_shape_cell(skb, ETH_HLEN, proto, carried);
    }
    // The color for a GRED leaf on the IFB (its drop precedence is
    // skb->tc_index): kept, since the mirred filter that follows steals the
    // packet and the kernel only overwrites tc_index on TC_ACT_OK.
    skb->tc_index = c % 3;
    c /= 3;
    // Read at constant offsets: without CAP_PERFMON the verifier refuses a
    // variable offset into the map value ("pointer arithmetic with it
    // prohibited for !root"). Laundered: clang knows c < 8, the verifier's
    // bounds of the division do not.
    // Each value loaded (and laundered) before the choice, so that clang
    // does not pick among addresses instead, which is the same refusal.
    c = qm_launder(c) & 7;
    __u32 v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = qm_launder(sh->prio[i]);
    __u32 prio = v[0];
#pragma unroll
    for (int i = 1; i < 8; i++)
        if (c == (__u32)i) prio = v[i];
    skb->priority = prio;
    return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "GPL";
