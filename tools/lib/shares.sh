# Shares of two HTB classes, measured by the kernel's own class counters while
# both are backlogged. Sourced by tools/e2e scripts.
#
# Why not the receivers' rates: two iperf3 flows started together do not
# start together. Under TCG one started up to a second before the other, ran
# alone at the full rate meanwhile, and its average over the run moved the
# ratio (77-download's export run: AF4:BE 1.82, BE 1.45 of its 0.97 Mbit/s,
# the two adding up to more than the shaped rate). The class counters over a
# window in which both move tell the scheduler's split alone.

# class_pair NS DEV CLASS_A CLASS_B: "BYTES_A BYTES_B", the bytes each class
# has sent, from one `tc -s class show` (two calls would be read apart in
# time).
class_pair() {
  ip netns exec "$1" tc -s class show dev "$2" 2>/dev/null | awk -v a="$3" -v b="$4" '
    $1 == "class" { c = $3 }
    $1 == "Sent" && c == a && ga == "" { ga = $2 }
    $1 == "Sent" && c == b && gb == "" { gb = $2 }
    END { printf "%d %d\n", ga, gb }'
}

# share_window NS DEV CLASS_A CLASS_B OUT: run beside two floods. Waits (up to
# 10 s) until both classes' counters move, lets the queues fill for
# SHARE_SETTLE seconds (default 0.5), then writes "BYTES_A BYTES_B" sent over
# the next SHARE_WINDOW seconds (default 1) to OUT, then the window's length
# in microseconds: "BYTES_A BYTES_B MICROSECONDS"; "0 0 0" if one never moved.
share_window() {
  local ns=$1 dev=$2 a=$3 b=$4 out=$5 s0 s1 t0 t1 t2 t3 _
  s0=$(class_pair "$ns" "$dev" "$a" "$b")
  for _ in $(seq 100); do
    sleep 0.1
    s1=$(class_pair "$ns" "$dev" "$a" "$b")
    [ "${s1% *}" -gt "${s0% *}" ] && [ "${s1#* }" -gt "${s0#* }" ] && break
  done
  if ! { [ "${s1% *}" -gt "${s0% *}" ] && [ "${s1#* }" -gt "${s0#* }" ]; }; then
    echo "0 0 0" >"$out"
    return
  fi
  sleep "${SHARE_SETTLE:-0.5}"
  # The window's ends: the middle of each tc call, in nanoseconds.
  t0=$(date +%s%N); s0=$(class_pair "$ns" "$dev" "$a" "$b"); t1=$(date +%s%N)
  sleep "${SHARE_WINDOW:-1}"
  t2=$(date +%s%N); s1=$(class_pair "$ns" "$dev" "$a" "$b"); t3=$(date +%s%N)
  echo "$((${s1% *} - ${s0% *})) $((${s1#* } - ${s0#* })) $(((t2 + t3 - t0 - t1) / 2000))" >"$out"
}

# share_ratio FILE LOW HIGH: whether FILE's "A B" has B > 0 and LOW <= A/B <= HIGH.
share_ratio() {
  awk -v lo="$2" -v hi="$3" '{ exit !($2 > 0 && $1 / $2 >= lo && $1 / $2 <= hi) }' "$1"
}

# share_rate FILE TARGET PERCENT: whether both classes together sent at
# TARGET bit/s (±PERCENT) over the window: the shaper's rate while both were
# backlogged, frames as HTB counts them.
share_rate() {
  awk -v t="$2" -v p="$3" '{ r = $3 > 0 ? ($1 + $2) * 8e6 / $3 : 0; d = r - t; if (d < 0) d = -d; exit !(r > 0 && d * 100 <= p * t) }' "$1"
}

# share_text FILE: "A:B bytes = RATIO in S s, R Mbit/s" for a check's name.
share_text() {
  awk '{ printf "%d:%d bytes = %s in %.2f s, together %.2f Mbit/s", $1, $2,
    ($2 > 0 ? sprintf("%.2f", $1 / $2) : "inf"), $3 / 1e6, ($3 > 0 ? ($1 + $2) * 8 / $3 : 0) }' "$1" 2>/dev/null
}
