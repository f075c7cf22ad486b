#!/usr/bin/env bash
# make test-stress: runs the suites that need the local environment (the
# integration and end-to-end tiers by default) STRESS_ROUNDS times, while a
# second copy of the same suites runs beside them in a loop, and prints
# "N passed, M failed" per package. A test that passes here does not depend
# on an idle machine: this is how CI's 2-core machines behave when busy.
#
# Environment: STRESS_ROUNDS (default 5), STRESS_PACKAGES (default
# "./test/integration ./test/e2e"), STRESS_DIR (default .local/stress: test
# binaries, one log per run, summary.txt), IM_ENV_BIN_DIR and IM_ENV_VENV
# (set by the Makefile). Exit status 1 if any measured run failed.
set -euo pipefail

rounds=${STRESS_ROUNDS:-5}
read -r -a pkgs <<<"${STRESS_PACKAGES:-./test/integration ./test/e2e}"
dir=$(realpath -m "${STRESS_DIR:-.local/stress}")
root=$(pwd)
: "${IM_ENV_BIN_DIR:?set by make test-stress}" "${IM_ENV_VENV:?set by make test-stress}"

rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/logs"
echo ">> compiling ${pkgs[*]}"
for p in "${pkgs[@]}"; do
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

# The load: the same suites, in a loop, in a process group of their own so
# that it can be stopped as a whole (the environments they start die with
# them: their processes carry a parent-death signal).
load() {
	local i=0
	while :; do
		i=$((i + 1))
		local pids=()
		for p in "${pkgs[@]}"; do
			run load "$i" "$p" &
			pids+=($!)
		done
		for pid in "${pids[@]}"; do wait "$pid" || true; done
	done
}
setsid bash -c "$(declare -f run load); dir='$dir' root='$root' pkgs=(${pkgs[*]}); load" &
load_pid=$!
trap 'kill -TERM -- -"$load_pid" 2>/dev/null || true' EXIT

declare -A passed failed
for p in "${pkgs[@]}"; do passed[$p]=0 failed[$p]=0; done
start=$(date +%s)
for r in $(seq 1 "$rounds"); do
	declare -A pid=()
	for p in "${pkgs[@]}"; do
		run measured "$r" "$p" &
		pid[$p]=$!
	done
	for p in "${pkgs[@]}"; do
		if wait "${pid[$p]}"; then
			passed[$p]=$((passed[$p] + 1))
			echo ">> round $r/$rounds $p: ok"
		else
			failed[$p]=$((failed[$p] + 1))
			echo ">> round $r/$rounds $p: FAILED (log: $dir/logs/measured-$r-$(basename "$p").log)"
			grep -E -- '^\s*--- FAIL' "$dir/logs/measured-$r-$(basename "$p").log" | sed 's/^/   /' || true
		fi
	done
done

load_runs=$(find "$dir/logs" -name 'load-*' | wc -l)
load_failed=$(grep -L -E '^(ok|PASS)$' "$dir/logs"/load-*.log 2>/dev/null | wc -l)
{
	echo "test-stress: $rounds round(s) in $(($(date +%s) - start))s, with a second copy of the suites running beside them"
	for p in "${pkgs[@]}"; do
		echo "$p: ${passed[$p]} passed, ${failed[$p]} failed"
	done
	echo "load copy (not measured; its last runs were cut short): $load_runs run(s) started, $load_failed without a PASS line"
} | tee "$dir/summary.txt"

for p in "${pkgs[@]}"; do
	[ "${failed[$p]}" -eq 0 ] || exit 1
done
