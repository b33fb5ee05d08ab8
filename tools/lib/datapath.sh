# Shared shell for the datapath matrix scripts in tools/e2e (35-datapath-matrix,
# 55-flow-rules; source it after tools/lib/netns.sh, bash only): one qosmapd
# config run by each datapath in the router namespace $R of
# netns_topology_2x2.
#
#   datapath_start NAME CONFIG   starts datapath NAME with CONFIG (which holds
#       the line `queues: [0]`); returns 1, after one line saying why, when
#       the datapath refuses the config or does not come up:
#     nfqueue  qosmapd with CONFIG, fed by iptables/ip6tables -j NFQUEUE;
#     ebpf     qosmapd with CONFIG's `queues: [0]` replaced by `datapath: ebpf`
#              (tc clsact egress on every interface it names, no NFQUEUE rule);
#     nft      `qosmap export nft --config CONFIG` loaded with nft -f, no daemon;
#     export   nft's ruleset, and `qosmap export tc --config CONFIG` (leaves:
#              fq_codel where the router's kernel has it, else bfifo) applied
#              with tc -batch: the queues: trees too, no daemon.
#   datapath_stop NAME   undoes datapath_start (SIGTERM for the daemon, up to 5 s).
#   datapath_leaf        fq_codel or bfifo: the leaf the router's kernel takes.
#
# Needs BIN (the build's bin path), WORK (a scratch directory) and the
# caller's fail function. Sets DPID (the daemon's pid, "" when none); the
# daemon's log is $WORK/daemon.log (appended), the export $WORK/export.nft.
DPID=""

# datapath_wait_ready LOG BEFORE: up to 10 s for LOG to hold more than BEFORE
# "qosmapd ready" lines, or for the daemon to exit.
datapath_wait_ready() {
  local _
  for _ in $(seq 100); do
    [ "$(grep -c "qosmapd ready" "$1" 2>/dev/null)" -gt "$2" ] && return 0
    kill -0 "$DPID" 2>/dev/null || break
    sleep 0.1
  done
  echo "    qosmapd did not become ready: $(grep -v '^$' "$1" | tail -1)"
  kill -KILL "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; DPID=""
  return 1
}

datapath_start() {  # NAME CONFIG
  local dp=$1 config=$2 log=$WORK/daemon.log before
  before=$(grep -c "qosmapd ready" "$log" 2>/dev/null); before=${before:-0}
  case $dp in
    nfqueue)
      # Not through inr: $! must be the daemon itself (ip netns exec execs it), not a subshell.
      ip netns exec "$R" "$BIN/qosmapd" --config "$config" >>"$log" 2>&1 &
      DPID=$!
      datapath_wait_ready "$log" "$before" || return 1
      queue_rules add --queue-num 0 ;;
    nft)
      "$BIN/qosmap" export nft --config "$config" >"$WORK/export.nft" 2>"$WORK/export.err" \
        || { echo "    qosmap export nft refused the config: $(head -1 "$WORK/export.err")"; return 1; }
      inr nft -f "$WORK/export.nft" 2>"$WORK/export.err" \
        || { echo "    nft -f refused the export: $(head -1 "$WORK/export.err")"; return 1; } ;;
    export)
      datapath_start nft "$config" || return 1
      "$BIN/qosmap" export tc --config "$config" --leaf "$(datapath_leaf)" -o "$WORK/export.tc" 2>"$WORK/export.err" \
        || { echo "    qosmap export tc refused the config: $(head -1 "$WORK/export.err")"; return 1; }
      inr tc -batch "$WORK/export.tc" >"$WORK/export.err" 2>&1 \
        || { echo "    tc -batch refused the export: $(head -1 "$WORK/export.err")"; return 1; } ;;
    ebpf)
      sed 's/^queues: \[0\]$/datapath: ebpf/' "$config" >"$config.ebpf.yaml"; chmod 644 "$config.ebpf.yaml"
      ip netns exec "$R" "$BIN/qosmapd" --config "$config.ebpf.yaml" >>"$log" 2>&1 &
      DPID=$!
      datapath_wait_ready "$log" "$before" || return 1 ;;
    *) echo "    unknown datapath $dp"; return 1 ;;
  esac
}

datapath_stop() {  # NAME
  local _
  case $1 in
    nft) inr nft delete table inet qosmap 2>/dev/null ;;
    export)
      local d
      inr nft delete table inet qosmap 2>/dev/null
      # The root qdiscs the script added: "qdisc add|replace dev D root ...".
      for d in $(awk '$1 == "qdisc" && $3 == "dev" && $5 == "root" { print $4 }' "$WORK/export.tc" 2>/dev/null | sort -u); do
        inr tc qdisc del dev "$d" root 2>/dev/null
      done ;;
    nfqueue|ebpf)
      [ "$1" = nfqueue ] && queue_rules del --queue-num 0 2>/dev/null
      [ -n "$DPID" ] || return 0
      kill -TERM "$DPID"; for _ in $(seq 50); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$DPID" 2>/dev/null && { fail "qosmapd (pid $DPID) still running 5 s after SIGTERM"; kill -KILL "$DPID"; }
      wait "$DPID" 2>/dev/null; DPID=""
      if [ "$1" = ebpf ]; then
        local d
        for d in $(inr ls /sys/class/net); do
          inr tc filter show dev "$d" egress 2>/dev/null | grep -q "handle 0x7173" \
            && fail "ebpf: qosmapd's tc filter is left on $d after SIGTERM"
        done
      fi ;;
  esac
  return 0
}

# datapath_leaf: fq_codel when the router's kernel takes an fq_codel qdisc
# (asked of the kernel on a scratch dummy link), else bfifo.
datapath_leaf() {
  local leaf=bfifo
  ip -n "$R" link add qmleafprobe type dummy 2>/dev/null || { echo bfifo; return; }
  ip netns exec "$R" tc qdisc add dev qmleafprobe root fq_codel 2>/dev/null && leaf=fq_codel
  ip -n "$R" link del qmleafprobe 2>/dev/null
  echo $leaf
}
