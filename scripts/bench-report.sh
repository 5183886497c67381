#!/usr/bin/env bash
# bench-report.sh OUT RC: build/bench/report.md and the latency CDF plot
# (build/bench/exec-cdf.png) of one `make bench` run, from what that run
# printed (OUT/terminal.txt) and the raw per-exec samples it kept
# (OUT/samples/*.txt, microseconds, one a line). RC is the bench's exit
# status: a run that did not finish is reported as partial.
set -uo pipefail
OUT=$1
RC=${2:-0}
S=$OUT/samples
R=$OUT/report.md
PNG=$OUT/exec-cdf.png

# the machine, read from the kernel
kernel=$(uname -r)
cores=$(nproc)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
cg2=$(findmnt -t cgroup2 -n -o TARGET | head -1)
cgv1=$(findmnt -t cgroup -n -o TARGET | xargs -r -n1 basename | paste -sd, -)
if [ -n "$cgv1" ]; then
	layout="hybrid: cgroup2 at ${cg2:-?}, v1 hierarchies $cgv1"
else
	layout="pure v2 at ${cg2:-?}"
fi
ver=$(cd "$(dirname "$0")/.." && git describe --always --dirty 2>/dev/null || cat VERSION 2>/dev/null)

# the plot: one CDF per series that has samples
plot_note=
series=(fork.txt "host fork+exec" floor.txt "kernel floor (bk-bench floor)" unshare.txt "unshare -n"
	admin.txt "boxkite admin exec" https.txt "boxkite HTTPS via the shim" runc.txt "runc exec")
# the density run's, when it ran: admin-<N>pods.txt
for f in "$S"/admin-*pods.txt; do
	[ -e "$f" ] || continue
	b=$(basename "$f")
	n=${b#admin-}
	series+=("$b" "boxkite admin exec, spread over ${n%pods.txt} pods")
	[ -s "$S/admin-1pod.txt" ] && series+=(admin-1pod.txt "boxkite admin exec, 1 pod alone, before and after those")
done
if ! command -v gnuplot >/dev/null; then
	plot_note="no plot: gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox)"
else
	plots=()
	# one colour and dash per series, the same in every report
	styles=("lc rgb '#000000' lw 2" "lc rgb '#000000' lw 2 dt 2" "lc rgb '#8c8c8c' lw 2" "lc rgb '#1f5fbf' lw 3" "lc rgb '#e07000' lw 3"
		"lc rgb '#c01818' lw 2" "lc rgb '#7a2fb0' lw 2 dt 2" "lc rgb '#7a2fb0' lw 2 dt 3")
	xmin= xmax=
	for ((i = 0; i < ${#series[@]}; i += 2)); do
		f=$S/${series[i]}
		[ -s "$f" ] || continue
		n=$(wc -l <"$f")
		# x: ms; y: the fraction of execs at or below x
		sort -g "$f" | awk -v n="$n" '{ printf "%.4f %.5f\n", $1 / 1000, NR / n }' >"$f.cdf"
		p50=$(awk -v k=$(((n + 1) / 2)) 'NR == k { printf "%.2f", $1 }' "$f.cdf")
		lo=$(head -1 "$f.cdf" | cut -d' ' -f1)
		hi=$(tail -1 "$f.cdf" | cut -d' ' -f1)
		[ -z "$xmin" ] || [ "$(echo "$lo < $xmin" | bc -l)" = 1 ] && xmin=$lo
		[ -z "$xmax" ] || [ "$(echo "$hi > $xmax" | bc -l)" = 1 ] && xmax=$hi
		plots+=("'$f.cdf' using 1:2 with lines ${styles[i / 2 % ${#styles[@]}]} title '${series[i + 1]} (n=$n, p50 $p50 ms)'")
	done
	if [ "${#plots[@]}" -eq 0 ]; then
		plot_note="no plot: this run kept no samples"
	else
		gp=$(printf '%s, ' "${plots[@]}")
		fp50=
		[ -s "$S/fork.txt.cdf" ] && fp50=$(awk -v k=$((($(wc -l <"$S/fork.txt") + 1) / 2)) 'NR == k { print $1 }' "$S/fork.txt.cdf")
		target=
		[ -n "$fp50" ] && target="set arrow from $(echo "$fp50 * 1.5" | bc -l),graph 0 to $(echo "$fp50 * 1.5" | bc -l),graph 1 nohead dt 2 lc rgb 'gray40'
set label 'target: 1.5x fork+exec p50' at $(echo "$fp50 * 1.5 * 1.05" | bc -l),graph 0.88 tc rgb 'gray30'"
		if ! gnuplot 2>"$OUT/gnuplot.err" <<EOF; then
set terminal pngcairo size 1200,900 font "sans,11"
set output "$PNG"
set title "One exec of /bin/sh -c true: latency CDF (this run: $kernel, $cores cores, $(date -u +%F))"
set xlabel "latency of one exec, ms (log scale)"
set ylabel "fraction of execs at or below"
set logscale x 10
set xtics ("0.2" 0.2, "0.5" 0.5, "1" 1, "2" 2, "5" 5, "10" 10, "20" 20, "50" 50, "100" 100, "200" 200, "500" 500, "1000" 1000)
set mxtics 10
set arrow from graph 0,first 0.5 to graph 1,first 0.5 nohead dt 3 lc rgb 'gray60'
set arrow from graph 0,first 0.99 to graph 1,first 0.99 nohead dt 3 lc rgb 'gray60'
set label 'p50' at graph 0.005,first 0.515 tc rgb 'gray40'
set label 'p99' at graph 0.005,first 0.975 tc rgb 'gray40'
set xrange [$(echo "$xmin / 1.3" | bc -l):$(echo "$xmax * 1.3" | bc -l)]
set yrange [0:1.0]
set ytics 0.1
set grid xtics mxtics ytics lc rgb "gray85"
set key below vertical maxrows 9 width 2
$target
plot ${gp%, }
EOF
			plot_note="no plot: gnuplot failed: $(head -c 300 "$OUT/gnuplot.err")"
		fi
		[ -s "$OUT/gnuplot.err" ] || rm -f "$OUT/gnuplot.err"
	fi
fi

{
	echo "# boxkite bench report"
	echo
	echo "$(date -u '+%F %T UTC'), boxkite $ver"
	echo
	echo "## Machine"
	echo
	echo "- kernel: $kernel"
	echo "- cores: $cores (${cpu:-unknown CPU}), memory $mem"
	echo "- cgroup layout: $layout"
	# (a sysctl of some hosts' guest kernels; the latency ratios feel it)
	if [ -r /proc/sys/kernel/sched_vcpu_pack ]; then
		echo "- scheduler: kernel.sched_vcpu_pack = $(cat /proc/sys/kernel/sched_vcpu_pack) (this guest kernel packs threads on fewer vCPUs; see docs/performance.md)"
	fi
	echo
	if [ "$RC" != 0 ]; then
		echo "**This run did not finish (exit status $RC): what follows is partial.**"
		echo
	fi
	echo "## Targets (issue 16), each a ratio or figure of this run"
	echo
	grep -E '(met|MISSED|skipped|reported)' "$OUT/terminal.txt" 2>/dev/null | sed -E 's/^/- /; s/MISSED/**MISSED**/'
	echo
	echo "## Latency CDF"
	echo
	if [ -s "$PNG" ]; then
		echo "![exec latency CDF](exec-cdf.png)"
		echo
		echo "Raw per-exec samples (microseconds, one a line): \`samples/\`."
	else
		echo "$plot_note"
	fi
	echo
	if [ -s "$OUT/shim-rss.txt" ]; then
		echo "## The shim's RSS, idle (after start-up and one health check), by mapping"
		echo
		echo '```'
		cat "$OUT/shim-rss.txt"
		echo '```'
		echo
	fi
	echo "## Everything the run printed"
	echo
	echo '```'
	cat "$OUT/terminal.txt" 2>/dev/null
	echo '```'
} >"$R"
echo "bench: report in $R${plot_note:+ ($plot_note)}" >&2
