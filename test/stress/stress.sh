#!/usr/bin/env bash
# make test-stress: runs the suites that need the local environment
# STRESS_ROUNDS times each, under load, and prints "N passed, M failed" per
# package. A test that passes here does not depend on an idle machine: this
# is how CI's 2-core machines behave when busy.
#
# Two stages, one after the other:
#  1. the integration and end-to-end tiers (STRESS_PACKAGES), measured
#     while a second copy of the same packages runs beside them in a loop;
#  2. the chaos suite (test/chaos, with IM_CHAOS=1, as make chaos runs it),
#     measured while a second copy of it runs beside it in a loop
#     (STRESS_CHAOS_LOAD=copy, the default) or while STRESS_BURNERS busy
#     processes (default 2, one per core) burn CPU beside it
#     (STRESS_CHAOS_LOAD=burn). Each measured run has a seed of its own,
#     printed in its log ("chaos seed N"): IM_CHAOS_SEED=N make chaos
#     replays it.
#
# Environment: STRESS_ROUNDS (default 5), STRESS_PACKAGES (default
# "./test/integration ./test/e2e/rotation ./test/e2e/rollout ./test/e2e/lifecycle"; empty skips stage 1), STRESS_CHAOS_ROUNDS
# (default STRESS_ROUNDS; 0 skips stage 2), STRESS_CHAOS_LOAD, STRESS_BURNERS,
# STRESS_DIR (default .local/stress: test binaries, one log per run,
# summary.txt), IM_ENV_BIN_DIR and IM_ENV_VENV (set by the Makefile). Exit
# status 1 if any measured run failed.
set -euo pipefail

rounds=${STRESS_ROUNDS:-5}
chaos_rounds=${STRESS_CHAOS_ROUNDS:-$rounds}
chaos_load=${STRESS_CHAOS_LOAD:-copy}
burners=${STRESS_BURNERS:-2}
read -r -a pkgs <<<"${STRESS_PACKAGES-./test/integration ./test/e2e/rotation ./test/e2e/rollout ./test/e2e/lifecycle}"
dir=$(realpath -m "${STRESS_DIR:-.local/stress}")
root=$(pwd)
: "${IM_ENV_BIN_DIR:?set by make test-stress}" "${IM_ENV_VENV:?set by make test-stress}"
case $chaos_load in copy | burn) ;; *)
	echo "STRESS_CHAOS_LOAD=$chaos_load: want copy (a second copy of the chaos suite beside it) or burn (STRESS_BURNERS busy processes)" >&2
	exit 2
	;;
esac

rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/logs"
all=("${pkgs[@]}")
[ "$chaos_rounds" -gt 0 ] && all+=(./test/chaos)
echo ">> compiling ${all[*]}"
for p in "${all[@]}"; do
	go test -c -o "$dir/bin/$(basename "$p").test" "$p"
done

# run COPY ROUND PKG: one run of one package's test binary, in the package
# directory as go test does; returns its exit status.
run() {
	local copy=$1 round=$2 p=$3 name
	name=$(basename "$p")
	(cd "$root/$p" && "$dir/bin/$name.test" -test.count=1 -test.timeout=45m -test.v) \
		>"$dir/logs/$copy-$round-$name.log" 2>&1
}

# load PKG...: the same suites, in a loop, each round's packages side by
# side.
load() {
	local i=0
	while :; do
		i=$((i + 1))
		local pids=()
		for p in "$@"; do
			run load "$i" "$p" &
			pids+=($!)
		done
		for pid in "${pids[@]}"; do wait "$pid" || true; done
	done
}

# burn: one busy process per burner, until killed.
burn() {
	for _ in $(seq 1 "$burners"); do
		(while :; do :; done) &
	done
	wait
}

# The load runs in a process group of its own so that it can be stopped as
# a whole (the environments its suites start die with them: their
# processes carry a parent-death signal).
load_pid=
start_load() {
	setsid bash -c "$(declare -f run load burn); dir='$dir' root='$root' burners='$burners'; $*" &
	load_pid=$!
}
stop_load() {
	if [ -n "$load_pid" ]; then
		kill -TERM -- -"$load_pid" 2>/dev/null || true
		wait "$load_pid" 2>/dev/null || true
		load_pid=
	fi
}
trap stop_load EXIT

declare -A passed failed
for p in "${all[@]}"; do passed[$p]=0 failed[$p]=0; done

# measure ROUNDS PKG...: ROUNDS measured rounds of the packages, side by
# side, counting passes and failures.
measure() {
	local n=$1 r p
	shift
	for r in $(seq 1 "$n"); do
		declare -A pid=()
		for p in "$@"; do
			run measured "$r" "$p" &
			pid[$p]=$!
		done
		for p in "$@"; do
			local log="$dir/logs/measured-$r-$(basename "$p").log" seed
			if wait "${pid[$p]}"; then
				passed[$p]=$((passed[$p] + 1))
				seed=$(grep -m1 -o 'chaos seed [0-9]*' "$log" || true)
				echo ">> round $r/$n $p: ok${seed:+ ($seed)}"
			else
				failed[$p]=$((failed[$p] + 1))
				seed=$(grep -m1 -o 'chaos seed [0-9]*' "$log" || true)
				echo ">> round $r/$n $p: FAILED${seed:+ ($seed)} (log: $log)"
				grep -E -- '^\s*--- FAIL' "$log" | sed 's/^/   /' || true
			fi
		done
	done
}

start=$(date +%s)
if [ "${#pkgs[@]}" -gt 0 ]; then
	echo ">> stage 1: ${pkgs[*]}, $rounds round(s), a second copy beside them"
	start_load "load ${pkgs[*]}"
	measure "$rounds" "${pkgs[@]}"
	stop_load
fi
chaos_beside="none"
if [ "$chaos_rounds" -gt 0 ]; then
	export IM_CHAOS=1
	if [ "$chaos_load" = copy ]; then
		chaos_beside="a second copy of the chaos suite"
		start_load "load ./test/chaos"
	else
		chaos_beside="$burners busy processes"
		start_load "burn"
	fi
	echo ">> stage 2: ./test/chaos, $chaos_rounds round(s), $chaos_beside beside it"
	measure "$chaos_rounds" ./test/chaos
	stop_load
fi

load_runs=$(find "$dir/logs" -name 'load-*' | wc -l)
load_failed=$(grep -L -E '^(ok|PASS)$' "$dir/logs"/load-*.log 2>/dev/null | wc -l || true)
{
	stage1="stage 1 skipped (STRESS_PACKAGES empty)"
	[ "${#pkgs[@]}" -gt 0 ] && stage1="stage 1 ($rounds round(s)) with a second copy of its suites beside it"
	echo "test-stress: in $(($(date +%s) - start))s; $stage1, stage 2 (chaos, $chaos_rounds round(s)) with $chaos_beside beside it"
	for p in "${all[@]}"; do
		echo "$p: ${passed[$p]} passed, ${failed[$p]} failed"
	done
	echo "load copies (not measured; their last runs were cut short): $load_runs run(s) started, $load_failed without a PASS line"
} | tee "$dir/summary.txt"

for p in "${all[@]}"; do
	[ "${failed[$p]}" -eq 0 ] || exit 1
done
