#ifndef CQOSMAP_SHIM_H
#define CQOSMAP_SHIM_H
#include <stddef.h>
#include <stdint.h>

/// MNL_SOCKET_BUFFER_SIZE, a macro Swift cannot import.
size_t cqosmap_mnl_socket_buffer_size(void);

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

/// Builds a config message on `buf`: a command (bind/unbind) when `cmd` is
/// nonzero, else copy mode/range, flags/mask and (if nonzero) the maxlen.
/// Returns its length. `ack` asks the kernel to acknowledge it.
size_t cqosmap_nfq_config(char *buf, uint16_t queue, uint8_t cmd, uint8_t copy_mode, uint32_t copy_range,
                          uint32_t flags, uint32_t flags_mask, uint32_t maxlen, uint32_t seq, int ack);

/// Appends a verdict message at `buf` (which must have room for the payload
/// plus 128 bytes) and returns its length. `has_*` select the options;
/// `batch` makes it an NFQNL_MSG_VERDICT_BATCH covering every id up to `id`.
size_t cqosmap_nfq_verdict(char *buf, uint16_t queue, uint32_t id, uint32_t verdict, int batch,
                           int has_mark, uint32_t mark, int has_priority, uint32_t priority,
                           const void *payload, uint32_t payload_len);

/// Sets NETLINK_NO_ENOBUFS and SO_RCVBUFFORCE (falling back to SO_RCVBUF),
/// socket options libmnl leaves to the caller. Returns 0 or -errno.
int cqosmap_netlink_tune(int fd, int rcvbuf, int no_enobufs);

#endif
