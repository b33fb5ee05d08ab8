# Shares of two HTB classes, measured by the kernel's own class counters while
# both are backlogged. Sourced by tools/e2e scripts.
#
# Why not the receivers' rates: two iperf3 flows started together do not
# start together. Under TCG one started up to a second before the other, ran
# alone at the full rate meanwhile, and its average over the run moved the
# ratio (77-download's export run: AF4:BE 1.82, BE 1.45 of its 0.97 Mbit/s,
# the two adding up to more than the shaped rate). The class counters over a
# stretch in which both move tell the scheduler's split alone.

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

# share_window NS DEV CLASS_A CLASS_B OUT: run in the background beside two
# floods; the caller touches OUT.stop when they are over (30 s at most).
# Samples both classes' counters every 0.2 s into OUT.series ("NS A B"), then
# takes the longest stretch in which both moved between every two samples,
# leaves out its first SHARE_SETTLE seconds (default 0.5: the queues fill)
# and its last step (a flow ending), and writes "BYTES_A BYTES_B
# MICROSECONDS" sent over the rest to OUT; "0 0 0" when that rest is shorter
# than SHARE_MIN seconds (default 1). Sampling throughout, not one window at
# a fixed time: under TCG a window placed after a fixed sleep fell past a
# flow's end when the guest was slow.
share_window() {
  local ns=$1 dev=$2 a=$3 b=$4 out=$5 t p _
  rm -f "$out.stop" "$out.series"
  for _ in $(seq 150); do
    t=$(date +%s%N); p=$(class_pair "$ns" "$dev" "$a" "$b")
    echo "$t $p" >>"$out.series"
    [ -e "$out.stop" ] && break
    sleep 0.2
  done
  awk -v settle="${SHARE_SETTLE:-0.5}" -v min="${SHARE_MIN:-1}" '
    { t[NR] = $1; a[NR] = $2; b[NR] = $3 }
    END {
      # Runs of samples i-1 -> i in which both counters grew; the longest.
      best = 0; bs = 0; be = 0; s = 0
      for (i = 2; i <= NR; i++) {
        if (a[i] > a[i - 1] && b[i] > b[i - 1]) {
          if (s == 0) s = i - 1
          if (i - s > best) { best = i - s; bs = s; be = i }
        } else s = 0
      }
      if (best == 0) { print "0 0 0"; exit }
      # Settle: the first sample at least SHARE_SETTLE after the run began;
      # the end: one sample before its last.
      i0 = bs; while (i0 < be && t[i0] - t[bs] < settle * 1e9) i0++
      i1 = be - 1
      if (i1 <= i0 || t[i1] - t[i0] < min * 1e9) { print "0 0 0"; exit }
      printf "%d %d %d\n", a[i1] - a[i0], b[i1] - b[i0], (t[i1] - t[i0]) / 1000
    }' "$out.series" >"$out"
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
