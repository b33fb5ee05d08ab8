#include "CQoSMapShim.h"
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/netfilter.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

size_t cqosmap_mnl_socket_buffer_size(void) { return (size_t)MNL_SOCKET_BUFFER_SIZE; }

static void parse_packet(const struct nlmsghdr *nlh, struct cqosmap_nfq_packet *p) {
    struct nlattr *attr[NFQA_MAX + 1];
    memset(attr, 0, sizeof(attr));
    memset(p, 0, sizeof(*p));
    if (nfq_nlmsg_parse(nlh, attr) < 0) return;
    if (attr[NFQA_PACKET_HDR] && mnl_attr_get_payload_len(attr[NFQA_PACKET_HDR]) >= sizeof(struct nfqnl_msg_packet_hdr)) {
        const struct nfqnl_msg_packet_hdr *h = mnl_attr_get_payload(attr[NFQA_PACKET_HDR]);
        p->present |= CQOSMAP_NFQ_HAS_HDR;
        p->id = ntohl(h->packet_id);
        p->hw_protocol = ntohs(h->hw_protocol);
        p->hook = h->hook;
    }
#define U32(A, BIT, FIELD) \
    if (attr[A] && mnl_attr_get_payload_len(attr[A]) >= 4) { p->present |= BIT; p->FIELD = ntohl(mnl_attr_get_u32(attr[A])); }
    U32(NFQA_MARK, CQOSMAP_NFQ_HAS_MARK, mark)
    U32(NFQA_IFINDEX_INDEV, CQOSMAP_NFQ_HAS_INDEV, indev)
    U32(NFQA_IFINDEX_OUTDEV, CQOSMAP_NFQ_HAS_OUTDEV, outdev)
    U32(NFQA_CAP_LEN, CQOSMAP_NFQ_HAS_CAPLEN, cap_len)
    U32(NFQA_SKB_INFO, CQOSMAP_NFQ_HAS_SKBINFO, skb_info)
    U32(NFQA_PRIORITY, CQOSMAP_NFQ_HAS_PRIORITY, priority)
    U32(NFQA_UID, CQOSMAP_NFQ_HAS_UID, uid)
    U32(NFQA_GID, CQOSMAP_NFQ_HAS_GID, gid)
#undef U32
    if (attr[NFQA_PAYLOAD]) {
        p->present |= CQOSMAP_NFQ_HAS_PAYLOAD;
        p->payload = mnl_attr_get_payload(attr[NFQA_PAYLOAD]);
        p->payload_len = mnl_attr_get_payload_len(attr[NFQA_PAYLOAD]);
    }
}

int cqosmap_nfq_walk(void *buf, size_t len, void *ctx,
                     void (*cb)(void *ctx, const struct cqosmap_nfq_packet *pkt), int *error) {
    int count = 0;
    int remaining = (int)len;
    struct nlmsghdr *nlh = buf;
    struct cqosmap_nfq_packet pkt;
    while (mnl_nlmsg_ok(nlh, remaining)) {
        if (nlh->nlmsg_type == NLMSG_ERROR) {
            const struct nlmsgerr *err = mnl_nlmsg_get_payload(nlh);
            if (nlh->nlmsg_len >= mnl_nlmsg_size(sizeof(*err)) && err->error != 0 && error) *error = -err->error;
        } else if (nlh->nlmsg_type == ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET)) {
            parse_packet(nlh, &pkt);
            cb(ctx, &pkt);
            count++;
        }
        nlh = mnl_nlmsg_next(nlh, &remaining);
    }
    // Leftover bytes that do not form a message mean a truncated datagram.
    return (count == 0 && remaining > 0) ? -1 : count;
}

size_t cqosmap_nfq_config(char *buf, uint16_t queue, uint8_t cmd, uint8_t copy_mode, uint32_t copy_range,
                          uint32_t flags, uint32_t flags_mask, uint32_t maxlen, uint32_t seq, int ack) {
    struct nlmsghdr *nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, queue);
    nlh->nlmsg_seq = seq;
    if (ack) nlh->nlmsg_flags |= NLM_F_ACK;
    if (cmd) {
        nfq_nlmsg_cfg_put_cmd(nlh, AF_UNSPEC, cmd);
    } else {
        nfq_nlmsg_cfg_put_params(nlh, copy_mode, (int)copy_range);
        if (flags_mask) {
            mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, htonl(flags));
            mnl_attr_put_u32(nlh, NFQA_CFG_MASK, htonl(flags_mask));
        }
        if (maxlen) nfq_nlmsg_cfg_put_qmaxlen(nlh, maxlen);
    }
    return nlh->nlmsg_len;
}

size_t cqosmap_nfq_verdict(char *buf, uint16_t queue, uint32_t id, uint32_t verdict, int batch,
                           int has_mark, uint32_t mark, int has_priority, uint32_t priority,
                           const void *payload, uint32_t payload_len) {
    struct nlmsghdr *nlh = nfq_nlmsg_put(buf, batch ? NFQNL_MSG_VERDICT_BATCH : NFQNL_MSG_VERDICT, queue);
    nfq_nlmsg_verdict_put(nlh, (int)id, (int)verdict);
    if (has_mark) nfq_nlmsg_verdict_put_mark(nlh, mark);
    if (has_priority) mnl_attr_put_u32(nlh, NFQA_PRIORITY, htonl(priority));
    if (payload && !batch) nfq_nlmsg_verdict_put_pkt(nlh, payload, payload_len);
    return nlh->nlmsg_len;
}

int cqosmap_netlink_tune(int fd, int rcvbuf, int no_enobufs) {
    // Set either way, so a reconfiguration can turn it off again.
    int on = no_enobufs ? 1 : 0;
    if (setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &on, sizeof(on)) < 0) return -errno;
    if (rcvbuf > 0) {
        // SO_RCVBUFFORCE passes rmem_max with CAP_NET_ADMIN; fall back to SO_RCVBUF without it.
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0 &&
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) < 0)
            return -errno;
    }
    return 0;
}
