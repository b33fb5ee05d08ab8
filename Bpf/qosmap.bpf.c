// qosmapd's in-kernel datapath: a tc clsact egress classifier that remarks
// DSCP (ECN kept) and sets skb mark and priority from tables the daemon
// compiles (see Sources/BPFClassifier and Sources/QoSMapDaemon/EBPFDatapath.swift).
//
// Maps (their layout is mirrored in BPFTableLayout.swift; a test checks it):
//   qm_gen      ARRAY[1] of u32: the active slot (0 or 1). The daemon fills the
//               other slot whole, then flips this one word: a packet reads it
//               once, so it decides with one slot only and never half a table.
//   qm_ingress  ARRAY[QM_IFINDEX_ARRAY] ifindex -> u32[2]: the ingress policy
//               per slot (unset: 0). ifindex >= QM_IFINDEX_ARRAY: qm_ingress_hash.
//   qm_egress   the same for the egress policy (qm_egress_hash above it).
//               Arrays because a hash lookup cost about 25 ns each here
//               (tools/bench/bpf-run: 140 ns a packet with hashes, 12 with arrays).
//   qm_table    ARRAY[2 * IN * OUT * 80] of struct qm_entry: per (slot, in,
//               out), 64 entries by DSCP, then 16 by PCP << 1 | DEI.
//   qm_config   ARRAY[1] of struct qm_config: the skb->mark bits that carry
//               a tag's PCP and DEI from qosmap_ingress to qosmap_egress.
//   qm_counters PERCPU_ARRAY[CELLS * OUTCOMES + 1] of u64.
// qosmap_ingress runs at clsact ingress on interfaces that trust 802.1p: it
// puts the tag's PCP and DEI (0 and 0 for an untagged frame) in the carry
// bits of skb->mark; qosmap_egress then picks the entry by them, not by
// DSCP, and clears those bits. (skb->mark is what survives forwarding:
// skb->tc_index and skb->cb do not, and ip_forward rewrites skb->priority.)
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
#define QM_PER_PAIR 80  // 64 by DSCP, then 16 by PCP << 1 | DEI (trust 8021p)
#define QM_PCP_BASE 64
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

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u32);
} qm_gen SEC(".maps");

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

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct qm_config);
} qm_config SEC(".maps");

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

struct vlan_hdr_qm {
    __be16 tci;
    __be16 proto;
};

// Marks the IP packet whose header starts at `off` (a constant in each
// inlined copy: without CAP_PERFMON the verifier refuses packet pointers
// moved by a register, however bounded).
static __always_inline int mark_ip(struct __sk_buff *skb, const __u32 off, __be16 proto) {
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

    __u32 zero = 0;
    __u32 *gen = bpf_map_lookup_elem(&qm_gen, &zero);
    if (!gen) return TC_ACT_OK;
    __u32 slot = *gen & 1;
    __u32 in_if = skb->ingress_ifindex, out_if = skb->ifindex;
    __u32 in = 0, out = 0;
    if (in_if) {
        struct qm_policy *p = policy(&qm_ingress, &qm_ingress_hash, in_if);
        if (p) in = p->slot[slot];
    }
    struct qm_policy *q = policy(&qm_egress, &qm_egress_hash, out_if);
    if (q) out = q->slot[slot];
    if (in >= QM_MAX_IN || out >= QM_MAX_OUT) return TC_ACT_OK;
    __u32 index = ((slot * QM_MAX_IN + in) * QM_MAX_OUT + out) * QM_PER_PAIR + dscp;
    struct qm_config *cfg = bpf_map_lookup_elem(&qm_config, &zero);
    if (cfg && cfg->carry_mask) {
        __u32 carried = (skb->mark & cfg->carry_mask) >> (cfg->carry_shift & 31);
        if (carried & QM_CARRIED) {
            index = index - dscp + QM_PCP_BASE + (carried & 0xf);
            skb->mark &= ~cfg->carry_mask;
        }
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
    if (e->flags & QM_F_PRIORITY) skb->priority = e->priority;
    count((__u32)(e->cell % QM_CELLS) * QM_OUTCOMES + outcome);
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
    if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD)) return mark_ip(skb, ETH_HLEN, proto);
    struct vlan_hdr_qm *v = data + ETH_HLEN;
    if ((void *)(v + 2) > end) {
        if ((void *)(v + 1) > end) return TC_ACT_OK;
        return v->proto == bpf_htons(ETH_P_8021Q) || v->proto == bpf_htons(ETH_P_8021AD)
                   ? TC_ACT_OK
                   : mark_ip(skb, ETH_HLEN + 4, v->proto);
    }
    if (v[0].proto != bpf_htons(ETH_P_8021Q) && v[0].proto != bpf_htons(ETH_P_8021AD))
        return mark_ip(skb, ETH_HLEN + 4, v[0].proto);
    return mark_ip(skb, ETH_HLEN + 8, v[1].proto);
}


// Trust 802.1p: the tag's PCP and DEI into skb->mark's carry bits. The tag
// is in skb->vlan_tci when the receive path took it out of the data (it
// always does before tc ingress, unless a driver left it), else in the data.
SEC("tc")
int qosmap_ingress(struct __sk_buff *skb) {
    __u32 zero = 0;
    struct qm_config *cfg = bpf_map_lookup_elem(&qm_config, &zero);
    if (!cfg || !cfg->carry_mask) return TC_ACT_OK;
    __u32 tci, s_tag;
    if (skb->vlan_present) {
        tci = skb->vlan_tci;
        s_tag = skb->vlan_proto == bpf_htons(ETH_P_8021AD);
    } else if (skb->protocol == bpf_htons(ETH_P_8021Q) || skb->protocol == bpf_htons(ETH_P_8021AD)) {
        void *data = (void *)(long)skb->data;
        void *end = (void *)(long)skb->data_end;
        struct vlan_hdr_qm *v = data + ETH_HLEN;
        if ((void *)(v + 1) > end) return TC_ACT_OK;
        tci = bpf_ntohs(v->tci);
        s_tag = skb->protocol == bpf_htons(ETH_P_8021AD);
    } else {
        // Untagged: no carry, so egress uses the entries by DSCP, which for
        // a trust-8021p policy hold the untrusted fallback.
        skb->mark &= ~cfg->carry_mask;
        return TC_ACT_OK;
    }
    // Only an S-tag's DEI marks drop eligibility (a C-tag's bit is the old CFI).
    __u32 carried = QM_CARRIED | ((tci >> 13) & 7) << 1 | (s_tag ? (tci >> 12) & 1 : 0);
    __u32 shift = cfg->carry_shift & 31;
    skb->mark = (skb->mark & ~cfg->carry_mask) | ((carried << shift) & cfg->carry_mask);
    return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
