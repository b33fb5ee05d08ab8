# Shared shell for the qosmapd end-to-end scripts in tools/e2e (source it
# after tools/lib/netns.sh, from the repository root; bash only): the build,
# pass/fail counting, the daemon run as the systemd unit runs it (as `nobody`
# with only CAP_NET_ADMIN, in the router namespace $R), its /metrics, and the
# UDP round trip through the router that 20 and 25 check.
#
#   qosmapd_prepare NAME WORK-TEMPLATE   needs root, or exits; installs the
#       deps, builds qosmapd and qosmap (debug) and sets BIN, WORK (a mode 755
#       directory from mktemp -d WORK-TEMPLATE), QOSMAPD_BIN (a copy of the
#       daemon that nobody may run), QOSMAPD_LOG and HELPER.
#   QOSMAPD_LOG (default $WORK/daemon.log)  the daemon's log, appended across restarts
#   QOSMAPD_PORT (default 9464)  the metrics port `metric` reads unless given one
#   QOSMAPD_METRIC_WAIT (default 0.3)  seconds `metric` waits before it reads
#   PY  the python3 that runs HELPER (tools/e2e/qosmapd_traffic.py)

source tools/lib/build.sh

DPID=""
passed=0; failed=0
pass() { passed=$((passed + 1)); echo "  ok: $*"; }
fail() { failed=$((failed + 1)); echo "  FAIL: $*"; }
# e2e_summary NAME: the last line of a script; fails if any check failed.
e2e_summary() { echo "$1: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; }

qosmapd_prepare() {
  [ "$(id -u)" -eq 0 ] || { echo "$1: needs root"; exit 1; }
  e2e_build "$1"
  HELPER=$PWD/tools/e2e/qosmapd_traffic.py
  WORK=$(mktemp -d "$2")
  chmod 755 "$WORK"
  QOSMAPD_BIN=$WORK/qosmapd
  cp "$BIN/qosmapd" "$QOSMAPD_BIN"; chmod 755 "$QOSMAPD_BIN"
  QOSMAPD_LOG=${QOSMAPD_LOG:-$WORK/daemon.log}
}

# start_daemon [CONFIG]: the daemon as nobody with CAP_NET_ADMIN only
# (ambient), in the background as DPID; waits up to 10 s for one more
# "qosmapd ready" line than the log held before (it is appended across restarts).
start_daemon() {
  local args=() before _
  [ -n "${1:-}" ] && args=(--config "$1")
  before=$(grep -c "qosmapd ready" "$QOSMAPD_LOG" 2>/dev/null)
  ip netns exec "$R" setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all,+net_admin \
    --ambient-caps=-all,+net_admin --bounding-set=-all,+net_admin -- "$QOSMAPD_BIN" "${args[@]}" \
    >>"$QOSMAPD_LOG" 2>&1 &
  DPID=$!
  for _ in $(seq 100); do
    [ "$(grep -c "qosmapd ready" "$QOSMAPD_LOG" 2>/dev/null)" -gt "${before:-0}" ] && return 0; sleep 0.1
  done
  echo "daemon did not become ready:"; tail -5 "$QOSMAPD_LOG"; return 1
}

# stop_daemon: SIGTERM, up to 5 s for the exit; returns the daemon's status.
stop_daemon() {
  [ -n "$DPID" ] || return 0
  local _ rc
  kill -TERM "$DPID"; for _ in $(seq 50); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
  wait "$DPID" 2>/dev/null; rc=$?; DPID=""; return $rc
}

# kill_daemon: for cleanup; a stopped (SIGSTOP) daemon dies too.
kill_daemon() {
  [ -n "$DPID" ] || return 0
  kill -CONT "$DPID" 2>/dev/null; kill -KILL "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; DPID=""
  return 0
}

# metric NAME [PORT]: the sum of every /metrics sample whose line starts with
# NAME (labels included in NAME narrow it). The daemon hands its counts to
# swift-metrics every 100 ms while busy and at its 250 ms receive timeout when
# idle, so a read first waits QOSMAPD_METRIC_WAIT.
metric() {
  sleep "${QOSMAPD_METRIC_WAIT:-0.3}"
  inr curl -s "http://127.0.0.1:${2:-${QOSMAPD_PORT:-9464}}/metrics" | awk -v m="$1" 'index($0, m) == 1 {s += $NF} END {print s+0}'
}

# udp_round NAME TOS-LIST|all MODE [PORT]: one UDP datagram per TOS (all: 256)
# and family from client to server; passes if every one arrives with the DSCP
# MODE says (mapped: what $WORK/default.json maps it to; original: unchanged)
# and its ECN bits intact.
udp_round() {
  local name=$1 tos=$2 mode=$3 port=${4:-5001} count rp ok bad
  if [ "$tos" = all ]; then count=512; else count=$(( $(tr ',' '\n' <<<"$tos" | wc -l) * 2 )); fi
  rm -f "$WORK/$name.json" "$WORK/$name.json.ready"
  ins timeout 20 "$PY" "$HELPER" recv "$port" "$count" 10 "$WORK/$name.json" &
  rp=$!
  wait_file "$WORK/$name.json.ready"
  inc timeout 20 "$PY" "$HELPER" send "$SERVER4" "$SERVER6" "$port" "$tos" "$name"
  wait $rp
  read -r ok bad < <("$PY" "$HELPER" check "$WORK/default.json" "$WORK/$name.json" "$tos" "$mode" | tee "$WORK/$name.check" | tail -1)
  grep -v '^[0-9]' "$WORK/$name.check"
  if [ "${bad:-1}" -eq 0 ] && [ "${ok:-0}" -eq "$count" ]; then pass "$name: $ok/$count datagrams (v4+v6) with the $mode DSCP and ECN intact"
  else fail "$name: $ok ok, $bad wrong of $count"; fi
}
