# Shared shell for tools/e2e and tools/bench (source it; bash only).
# A client -> router -> server path of network namespaces joined by veths,
# using only 198.18.0.0/15 and fd00::/8; every name carries a per-run suffix
# and netns_cleanup removes them all. Set before sourcing: NETNS_SUF (the
# suffix, default $$) and NETNS_PREFIX (default qm: namespaces qmc, qmr, qms),
# so that scripts running at once never share a namespace.
#
#   client c0 198.18.1.1  fd00:1::1   -- r0 198.18.1.254 fd00:1::fe (router)
#   server s0 198.19.2.1  fd00:2::1   -- r1 198.19.2.254 fd00:2::fe (router)

NETNS_SUF=${NETNS_SUF:-$$}; NETNS_PREFIX=${NETNS_PREFIX:-qm}
C=${NETNS_PREFIX}c$NETNS_SUF; R=${NETNS_PREFIX}r$NETNS_SUF; S=${NETNS_PREFIX}s$NETNS_SUF
CLIENT4=198.18.1.1; CLIENT6=fd00:1::1
SERVER4=198.19.2.1; SERVER6=fd00:2::1

inr() { ip netns exec "$R" "$@"; }
inc() { ip netns exec "$C" "$@"; }
ins() { ip netns exec "$S" "$@"; }

# netns_topology: creates the three namespaces, addresses and routes, and
# turns forwarding on in the router. GSO/TSO stay on (the veth default), so a
# queue in the router sees unsegmented CHECKSUM_PARTIAL super-packets.
netns_topology() {
  ip netns add "$C" && ip netns add "$R" && ip netns add "$S" || return 1
  ip link add c0 netns "$C" type veth peer name r0 netns "$R"
  ip link add s0 netns "$S" type veth peer name r1 netns "$R"
  local ns l
  for ns in "$C" "$R" "$S"; do ip -n "$ns" link set lo up; done
  ip -n "$C" addr add $CLIENT4/24 dev c0; ip -n "$C" addr add $CLIENT6/64 dev c0 nodad
  ip -n "$R" addr add 198.18.1.254/24 dev r0; ip -n "$R" addr add fd00:1::fe/64 dev r0 nodad
  ip -n "$R" addr add 198.19.2.254/24 dev r1; ip -n "$R" addr add fd00:2::fe/64 dev r1 nodad
  ip -n "$S" addr add $SERVER4/24 dev s0; ip -n "$S" addr add $SERVER6/64 dev s0 nodad
  for l in "$C c0" "$R r0" "$R r1" "$S s0"; do set -- $l; ip -n "$1" link set "$2" up; done
  ip -n "$C" route add default via 198.18.1.254; ip -n "$C" -6 route add default via fd00:1::fe
  ip -n "$S" route add default via 198.19.2.254; ip -n "$S" -6 route add default via fd00:2::fe
  inr sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
}

netns_cleanup() {
  local ns
  for ns in "$C" "$R" "$S"; do ip netns del "$ns" 2>/dev/null; done
  return 0
}

# queue_rules add|del ARGS...: the same iptables and ip6tables FORWARD rule
# (e.g. `queue_rules add --queue-num 0 --queue-bypass`).
queue_rules() {
  local op=-A t; [ "$1" = del ] && op=-D; shift
  for t in iptables ip6tables; do inr $t $op FORWARD -j NFQUEUE "$@"; done
}

# csum_errors_of NS: the namespace's UDP InCsumErrors + Udp6InCsumErrors +
# TCP InCsumErrors + Tcp6 (Ip6) checksum errors, summed: one number that must
# not move while a test sends traffic through a remarking router.
csum_errors_of() {
  ip netns exec "$1" awk '
    /^(Udp|Tcp):/ { n[$1]++; if (n[$1] == 1) { for (i = 1; i <= NF; i++) h[$1, i] = $i } else { for (i = 1; i <= NF; i++) if (h[$1, i] == "InCsumErrors") s += $i } }
    END { print s + 0 }' /proc/net/snmp
  ip netns exec "$1" awk '$1 == "Udp6InCsumErrors" || $1 == "UdpLite6InCsumErrors" { s += $2 } END { print s + 0 }' /proc/net/snmp6
}
csum_errors() { csum_errors_of "$S" | paste -sd+ | bc; }

# wait_file PATH: waits up to 5 s for PATH to exist (a helper's "ready" file);
# fails if it does not.
wait_file() {
  local _
  for _ in $(seq 50); do [ -e "$1" ] && return 0; sleep 0.1; done
  return 1
}

# A router with TWO ingress and TWO egress interfaces (tools/e2e/35-datapath-matrix):
#
#   client 1 $C1 c0 198.18.1.1 fd00:11::1 -- in1  198.18.1.254 fd00:11::fe
#   client 2 $C2 c0 198.18.2.1 fd00:12::1 -- in2  198.18.2.254 fd00:12::fe
#   server 1 $S1 s0 198.19.1.1 fd00:21::1 -- out1 198.19.1.254 fd00:21::fe
#   server 2 $S2 s0 198.19.2.1 fd00:22::1 -- out2 198.19.2.254 fd00:22::fe
#
# The router is $R (inr). netns_cleanup_2x2 removes the five namespaces.
C1=qmc1$NETNS_SUF; C2=qmc2$NETNS_SUF; S1=qms1$NETNS_SUF; S2=qms2$NETNS_SUF
netns_topology_2x2() {
  local ns n
  for ns in "$C1" "$C2" "$R" "$S1" "$S2"; do ip netns add "$ns" || return 1; ip -n "$ns" link set lo up; done
  for n in 1 2; do
    local c=C$n s=S$n
    ip link add c0 netns "${!c}" type veth peer name in$n netns "$R" || return 1
    ip link add s0 netns "${!s}" type veth peer name out$n netns "$R" || return 1
    ip -n "${!c}" addr add 198.18.$n.1/24 dev c0; ip -n "${!c}" addr add fd00:1$n::1/64 dev c0 nodad
    ip -n "$R" addr add 198.18.$n.254/24 dev in$n; ip -n "$R" addr add fd00:1$n::fe/64 dev in$n nodad
    ip -n "$R" addr add 198.19.$n.254/24 dev out$n; ip -n "$R" addr add fd00:2$n::fe/64 dev out$n nodad
    ip -n "${!s}" addr add 198.19.$n.1/24 dev s0; ip -n "${!s}" addr add fd00:2$n::1/64 dev s0 nodad
    ip -n "${!c}" link set c0 up; ip -n "${!s}" link set s0 up
    ip -n "$R" link set in$n up; ip -n "$R" link set out$n up
    ip -n "${!c}" route add default via 198.18.$n.254; ip -n "${!c}" -6 route add default via fd00:1$n::fe
    ip -n "${!s}" route add default via 198.19.$n.254; ip -n "${!s}" -6 route add default via fd00:2$n::fe
  done
  inr sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
}

netns_cleanup_2x2() {
  local ns
  for ns in "$C1" "$C2" "$R" "$S1" "$S2"; do ip netns del "$ns" 2>/dev/null; done
  return 0
}
