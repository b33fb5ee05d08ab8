# Shares of two HTB classes, measured by the kernel's own class counters while
# both are backlogged. Sourced by tools/e2e scripts.
#
# Why not the receivers' rates: two iperf3 flows started together do not
# start together. Under TCG one started up to a second before the other, ran
# alone at the full rate meanwhile, and its average over the run moved the
# ratio (77-download's export run: AF4:BE 1.82, BE 1.45 of its 0.97 Mbit/s,
# the two adding up to more than the shaped rate). The class counters over a
# stretch in which both move tell the scheduler's split alone.

# share_window NS DEV CLASS_A CLASS_B OUT: run in the background beside two
# floods; the caller touches OUT.stop when they are over (30 s at most).
# Samples both classes' counters every 0.2 s into OUT.series ("µs A B",
# tools/lib/share-sampler, one process inside the namespace), then
# takes the stretch in which both flows ran: from the first sample by which
# both counters had moved, plus SHARE_SETTLE seconds (default 0.5: the queues
# fill), to one sample before the earlier of their last moves (the one
# interval in which a flow may have ended). Writes "BYTES_A BYTES_B
# MICROSECONDS SAMPLES" sent over it to OUT; "0 0 0 SAMPLES" when it is shorter than
# SHARE_MIN seconds (default 1). Sampling throughout, not one window at a
# fixed time: under TCG a window placed after a fixed sleep fell past a
# flow's end when the guest was slow; and not "both moved in every step":
# under TCG's coarse timers a class can miss one 0.2 s step while backlogged.
share_window() {
  local ns=$1 dev=$2 a=$3 b=$4 out=$5
  rm -f "$out.stop" "$out.series"
  ip netns exec "$ns" "$(dirname "${BASH_SOURCE[0]}")/share-sampler" "$dev" "$a" "$b" "$out"
  awk -v settle="${SHARE_SETTLE:-0.5}" -v min="${SHARE_MIN:-1}" '
    { t[NR] = $1; a[NR] = $2; b[NR] = $3 }
    END {
      fa = fb = la = lb = 0
      for (i = 2; i <= NR; i++) {
        if (!fa && a[i] > a[1]) fa = i
        if (!fb && b[i] > b[1]) fb = i
        if (a[i] > a[i - 1]) la = i
        if (b[i] > b[i - 1]) lb = i
      }
      if (!fa || !fb) { print "0 0 0 " NR; exit }
      s = fa > fb ? fa : fb
      e = (la < lb ? la : lb) - 1
      i0 = s; while (i0 < e && t[i0] - t[s] < settle * 1e6) i0++
      if (e <= i0 || t[e] - t[i0] < min * 1e6) { print "0 0 0 " NR; exit }
      printf "%d %d %d %d\n", a[e] - a[i0], b[e] - b[i0], t[e] - t[i0], NR
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

# share_text FILE: "A:B bytes = RATIO in S s, together R Mbit/s (N samples)"
# for a check's name.
share_text() {
  awk '{ printf "%d:%d bytes = %s in %.2f s, together %.2f Mbit/s (%d samples)", $1, $2,
    ($2 > 0 ? sprintf("%.2f", $1 / $2) : "inf"), $3 / 1e6, ($3 > 0 ? ($1 + $2) * 8 / $3 : 0), $4 }' "$1" 2>/dev/null
}
