// The peer of tools/bench/bpf-run: a tc classifier that returns at once.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int qosmap_null(struct __sk_buff *skb) { return TC_ACT_OK; }

char LICENSE[] SEC("license") = "GPL";
