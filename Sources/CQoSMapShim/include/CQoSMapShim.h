#ifndef CQOSMAP_SHIM_H
#define CQOSMAP_SHIM_H
// Two parts, as swift-nio's CNIOLinux: constants for kernel macros (defined in
// shim.c, so this header needs no kernel header and declares nothing twice
// beside CNetfilterQueue), and the netlink codec for nfqueue: the config and
// verdict message builders and the walk over a received datagram.
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// MNL_SOCKET_BUFFER_SIZE, a macro Swift cannot import.
size_t cqosmap_mnl_socket_buffer_size(void);

/// The queue flags NFQA_CFG_F_* (linux/netfilter/nfnetlink_queue.h).
extern const uint32_t CQoSMapShim_NFQA_CFG_F_FAIL_OPEN;
extern const uint32_t CQoSMapShim_NFQA_CFG_F_CONNTRACK;
extern const uint32_t CQoSMapShim_NFQA_CFG_F_GSO;
extern const uint32_t CQoSMapShim_NFQA_CFG_F_UID_GID;
extern const uint32_t CQoSMapShim_NFQA_CFG_F_SECCTX;
/// The skb flags NFQA_SKB_* of the NFQA_SKB_INFO attribute.
extern const uint32_t CQoSMapShim_NFQA_SKB_CSUMNOTREADY;
extern const uint32_t CQoSMapShim_NFQA_SKB_GSO;
extern const uint32_t CQoSMapShim_NFQA_SKB_CSUM_NOTVERIFIED;
/// The verdicts NF_DROP, NF_ACCEPT, NF_REPEAT (linux/netfilter.h).
extern const uint32_t CQoSMapShim_NF_DROP;
extern const uint32_t CQoSMapShim_NF_ACCEPT;
extern const uint32_t CQoSMapShim_NF_REPEAT;
/// The copy modes NFQNL_COPY_* (enum nfqnl_config_mode) as the byte they travel in.
extern const uint8_t CQoSMapShim_NFQNL_COPY_NONE;
extern const uint8_t CQoSMapShim_NFQNL_COPY_META;
extern const uint8_t CQoSMapShim_NFQNL_COPY_PACKET;
/// The config commands NFQNL_CFG_CMD_BIND and NFQNL_CFG_CMD_UNBIND.
extern const uint8_t CQoSMapShim_NFQNL_CFG_CMD_BIND;
extern const uint8_t CQoSMapShim_NFQNL_CFG_CMD_UNBIND;

/// Bits of `cqosmap_nfq_packet.present`: which NFQA attributes the kernel sent.
enum {
    CQOSMAP_NFQ_HAS_HDR = 1 << 0,
    CQOSMAP_NFQ_HAS_MARK = 1 << 1,
    CQOSMAP_NFQ_HAS_INDEV = 1 << 2,
    CQOSMAP_NFQ_HAS_OUTDEV = 1 << 3,
    CQOSMAP_NFQ_HAS_PAYLOAD = 1 << 4,
    CQOSMAP_NFQ_HAS_CAPLEN = 1 << 5,
    CQOSMAP_NFQ_HAS_SKBINFO = 1 << 6,
    CQOSMAP_NFQ_HAS_PRIORITY = 1 << 7,
    CQOSMAP_NFQ_HAS_UID = 1 << 8,
    CQOSMAP_NFQ_HAS_GID = 1 << 9,
};

/// One queued packet's attributes in host byte order. The payload points into
/// the receive buffer.
struct cqosmap_nfq_packet {
    uint32_t present;
    uint32_t id;
    uint16_t hw_protocol;
    uint8_t hook;
    uint32_t mark;
    uint32_t indev;
    uint32_t outdev;
    uint32_t cap_len;
    uint32_t skb_info;
    uint32_t priority;
    uint32_t uid;
    uint32_t gid;
    void *payload;
    uint32_t payload_len;
};

/// Walks one received datagram. For each NFQNL_MSG_PACKET it fills `pkt` and
/// calls `cb`; for an NLMSG_ERROR carrying an error it stores the positive
/// errno in `*error` and continues. Returns the number of packets seen, or -1
/// when the datagram is malformed.
int cqosmap_nfq_walk(void *buf, size_t len, void *ctx,
                     void (*cb)(void *ctx, const struct cqosmap_nfq_packet *pkt), int *error);

/// An NFQNL_MSG_CONFIG message: a command when `command` is nonzero, else the
/// copy mode and range, the flags under `flags_mask` (when the mask is
/// nonzero) and the maxlen (when nonzero).
struct cqosmap_nfq_config {
    uint16_t queue;
    /// NFQNL_CFG_CMD_BIND or NFQNL_CFG_CMD_UNBIND; 0 for parameters.
    uint8_t command;
    uint8_t copy_mode;
    uint32_t copy_range;
    uint32_t flags;
    uint32_t flags_mask;
    uint32_t max_length;
    uint32_t sequence;
    /// Sets NLM_F_ACK: the kernel acknowledges the message.
    bool ack;
};

/// Builds `config` on `buf` (MNL_SOCKET_BUFFER_SIZE bytes suffice) and returns its length.
size_t cqosmap_nfq_put_config(char *buf, const struct cqosmap_nfq_config *config);

/// An NFQNL_MSG_VERDICT, or with `batch` an NFQNL_MSG_VERDICT_BATCH covering
/// every id up to `id` (which carries no payload).
struct cqosmap_nfq_verdict {
    uint16_t queue;
    uint32_t id;
    uint32_t verdict;
    bool batch;
    bool has_mark;
    uint32_t mark;
    bool has_priority;
    uint32_t priority;
    const void *payload;
    uint32_t payload_len;
};

/// Builds `verdict` at `buf` (which must have room for the payload plus 128
/// bytes) and returns its length.
size_t cqosmap_nfq_put_verdict(char *buf, const struct cqosmap_nfq_verdict *verdict);

#endif
