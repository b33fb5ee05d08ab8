#include "CQoSMapShim.h"
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/netfilter.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

size_t cqosmap_mnl_socket_buffer_size(void) { return (size_t)MNL_SOCKET_BUFFER_SIZE; }

const uint32_t CQoSMapShim_NFQA_CFG_F_FAIL_OPEN = NFQA_CFG_F_FAIL_OPEN;
const uint32_t CQoSMapShim_NFQA_CFG_F_CONNTRACK = NFQA_CFG_F_CONNTRACK;
const uint32_t CQoSMapShim_NFQA_CFG_F_GSO = NFQA_CFG_F_GSO;
const uint32_t CQoSMapShim_NFQA_CFG_F_UID_GID = NFQA_CFG_F_UID_GID;
const uint32_t CQoSMapShim_NFQA_CFG_F_SECCTX = NFQA_CFG_F_SECCTX;
const uint32_t CQoSMapShim_NFQA_SKB_CSUMNOTREADY = NFQA_SKB_CSUMNOTREADY;
const uint32_t CQoSMapShim_NFQA_SKB_GSO = NFQA_SKB_GSO;
const uint32_t CQoSMapShim_NFQA_SKB_CSUM_NOTVERIFIED = NFQA_SKB_CSUM_NOTVERIFIED;
const uint32_t CQoSMapShim_NF_DROP = NF_DROP;
const uint32_t CQoSMapShim_NF_ACCEPT = NF_ACCEPT;
const uint32_t CQoSMapShim_NF_REPEAT = NF_REPEAT;
const uint8_t CQoSMapShim_NFQNL_COPY_NONE = NFQNL_COPY_NONE;
const uint8_t CQoSMapShim_NFQNL_COPY_META = NFQNL_COPY_META;
const uint8_t CQoSMapShim_NFQNL_COPY_PACKET = NFQNL_COPY_PACKET;
const uint8_t CQoSMapShim_NFQNL_CFG_CMD_BIND = NFQNL_CFG_CMD_BIND;
const uint8_t CQoSMapShim_NFQNL_CFG_CMD_UNBIND = NFQNL_CFG_CMD_UNBIND;

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

size_t cqosmap_nfq_put_config(char *buf, const struct cqosmap_nfq_config *c) {
    struct nlmsghdr *nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, c->queue);
    nlh->nlmsg_seq = c->sequence;
    if (c->ack) nlh->nlmsg_flags |= NLM_F_ACK;
    if (c->command) {
        nfq_nlmsg_cfg_put_cmd(nlh, AF_UNSPEC, c->command);
    } else {
        nfq_nlmsg_cfg_put_params(nlh, c->copy_mode, (int)c->copy_range);
        if (c->flags_mask) {
            mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, htonl(c->flags));
            mnl_attr_put_u32(nlh, NFQA_CFG_MASK, htonl(c->flags_mask));
        }
        if (c->max_length) nfq_nlmsg_cfg_put_qmaxlen(nlh, c->max_length);
    }
    return nlh->nlmsg_len;
}

size_t cqosmap_nfq_put_verdict(char *buf, const struct cqosmap_nfq_verdict *v) {
    struct nlmsghdr *nlh = nfq_nlmsg_put(buf, v->batch ? NFQNL_MSG_VERDICT_BATCH : NFQNL_MSG_VERDICT, v->queue);
    nfq_nlmsg_verdict_put(nlh, (int)v->id, (int)v->verdict);
    if (v->has_mark) nfq_nlmsg_verdict_put_mark(nlh, v->mark);
    if (v->has_priority) mnl_attr_put_u32(nlh, NFQA_PRIORITY, htonl(v->priority));
    if (v->payload && !v->batch) nfq_nlmsg_verdict_put_pkt(nlh, v->payload, v->payload_len);
    return nlh->nlmsg_len;
}
