# lib_load.sh — sourced by the CPU benchmarks (bench_scaling.sh, bench_zero3.sh, run_step_bench.sh): how busy the
# machine was while a run of ours went, so a table can say whether its times were disturbed.
#   load                  the 1/5/15-minute load averages
#   cpu_snap DIR          sets SNAP="busy_jiffies total_jiffies children_seconds" (`times` runs in this shell, not in
#                         $(...); DIR holds its scratch file)
#   other_pct BEFORE AFTER  other processes' share: busy CPU time (/proc/stat) minus our children's CPU time, over
#                         wall time x cores, in percent
load() { cut -d' ' -f1-3 /proc/loadavg; }
HZ=$(getconf CLK_TCK)
cpu_snap() {
  times > "$1/times"
  SNAP="$(awk '/^cpu /{ print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9 }' /proc/stat) $(tail -1 "$1/times" |
    awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] } print s }')"
}
other_pct() {
  awk -v hz=$HZ -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " ");
    busy = (y[1] - x[1]) / hz; tot = (y[2] - x[2]) / hz; mine = y[3] - x[3];
    o = tot > 0 ? 100 * (busy - mine) / tot : 0; printf "%.1f\n", o < 0 ? 0 : o }'
}
