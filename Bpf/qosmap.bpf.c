// qosmapd's in-kernel datapath: a tc clsact egress classifier that remarks
// DSCP (ECN kept) and sets skb mark and priority from tables the daemon
// compiles (see Sources/BPFClassifier and Sources/QoSMapDaemon/EBPFDatapath.swift).
//
// Maps (their layout is mirrored in BPFTableLayout.swift; a test checks it):
//   qm_gen      ARRAY[1] of u32: the active slot (0 or 1). The daemon fills the
//               other slot whole, then flips this one word: a packet reads it
//               once, so it decides with one slot only and never half a table.
//   qm_ingress  HASH ifindex -> u32[2]: the ingress policy per slot (missing: 0).
//   qm_egress   HASH ifindex -> u32[2]: the egress policy per slot (missing: 0).
//   qm_table    ARRAY[2 * IN * OUT * 64] of struct qm_entry.
//   qm_counters PERCPU_ARRAY[CELLS * OUTCOMES + 1] of u64.
// Ingress policy 0 is `local` (ingress ifindex 0: host-originated) and every
// interface without a policy of its own.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define QM_MAX_IN 16
#define QM_MAX_OUT 16
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

struct qm_policy {
    __u32 slot[2];
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u32);
} qm_gen SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1024);
    __type(key, __u32);
    __type(value, struct qm_policy);
} qm_ingress SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1024);
    __type(key, __u32);
    __type(value, struct qm_policy);
} qm_egress SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 2 * QM_MAX_IN * QM_MAX_OUT * 64);
    __type(key, __u32);
    __type(value, struct qm_entry);
} qm_table SEC(".maps");

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

struct vlan_hdr_qm {
    __be16 tci;
    __be16 proto;
};

SEC("tc")
int qosmap_egress(struct __sk_buff *skb) {
    __u32 off = ETH_HLEN;
    __be16 proto = skb->protocol;
    // A tag the driver did not take into skb->vlan_tci is in the data; at
    // most two (QinQ). skb->protocol is then the outer tag's TPID.
    if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
        struct vlan_hdr_qm v;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            if (bpf_skb_load_bytes(skb, off, &v, sizeof(v)) < 0) return TC_ACT_OK;
            off += sizeof(v);
            proto = v.proto;
            if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD)) break;
        }
    }
    int v6;
    if (proto == bpf_htons(ETH_P_IP)) v6 = 0;
    else if (proto == bpf_htons(ETH_P_IPV6)) v6 = 1;
    else return TC_ACT_OK;  // not IP: nothing to mark, not counted (nfqueue never sees it)

    __u8 hdr[2];
    if (bpf_skb_load_bytes(skb, off, hdr, 2) < 0 || (hdr[0] >> 4) != (v6 ? 6 : 4) ||
        (!v6 && (hdr[0] & 0x0f) < 5)) {
        count(QM_MALFORMED_SLOT);
        return TC_ACT_OK;
    }
    __u8 tos = v6 ? (__u8)((hdr[0] << 4) | (hdr[1] >> 4)) : hdr[1];
    __u8 dscp = tos >> 2;

    __u32 zero = 0;
    __u32 *gen = bpf_map_lookup_elem(&qm_gen, &zero);
    if (!gen) return TC_ACT_OK;
    __u32 slot = *gen & 1;
    __u32 in_if = skb->ingress_ifindex, out_if = skb->ifindex;
    __u32 in = 0, out = 0;
    if (in_if) {
        struct qm_policy *p = bpf_map_lookup_elem(&qm_ingress, &in_if);
        if (p) in = p->slot[slot];
    }
    struct qm_policy *q = bpf_map_lookup_elem(&qm_egress, &out_if);
    if (q) out = q->slot[slot];
    if (in >= QM_MAX_IN || out >= QM_MAX_OUT) return TC_ACT_OK;
    __u32 index = ((slot * QM_MAX_IN + in) * QM_MAX_OUT + out) * 64 + dscp;
    struct qm_entry *e = bpf_map_lookup_elem(&qm_table, &index);
    if (!e) return TC_ACT_OK;

    __u32 outcome = QM_UNCHANGED;
    if ((e->flags & QM_F_DSCP) && e->dscp != dscp) {
        __u8 ntos = (__u8)((e->dscp << 2) | (tos & 3));  // ECN kept
        __u8 nhdr[2];
        if (v6) {
            nhdr[0] = (hdr[0] & 0xf0) | (ntos >> 4);
            nhdr[1] = (__u8)((ntos << 4) | (hdr[1] & 0x0f));
        } else {
            nhdr[0] = hdr[0];
            nhdr[1] = ntos;
        }
        if (bpf_skb_store_bytes(skb, off, nhdr, 2, 0) == 0) {
            // Only the IPv4 header has a checksum; DSCP is in no L4
            // pseudo-header, so GSO segments and L4 sums stay right.
            if (!v6) {
                __u16 from, to;
                __builtin_memcpy(&from, hdr, 2);
                __builtin_memcpy(&to, nhdr, 2);
                bpf_l3_csum_replace(skb, off + 10, from, to, 2);
            }
            outcome = QM_REWRITTEN;
        }
    }
    if (e->flags & QM_F_MARK) skb->mark = (skb->mark & ~e->mark_mask) | e->mark_value;
    if (e->flags & QM_F_PRIORITY) skb->priority = e->priority;
    count((__u32)(e->cell % QM_CELLS) * QM_OUTCOMES + outcome);
    return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
