#!/usr/bin/env bash
# Runs shellcheck on every shell script git tracks: *.sh files and files whose first line runs a
# shell (.ci/run, hack/git-hooks/*). Any finding, of any severity, fails it. `make lint` runs it;
# run it alone from anywhere in the clone. shellcheck comes from Debian's package
# (hack/install-test-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."

# .ci/run installs the Debian packages in a job beside `make lint`: wait for it there.
if [[ ${CI:-} == true ]]; then
	for _ in $(seq 60); do
		command -v shellcheck >/dev/null && break
		sleep 5
	done
fi
if ! command -v shellcheck >/dev/null; then
	echo "shellcheck: not installed (apt-get install shellcheck, or hack/install-test-deps.sh)" >&2
	exit 1
fi

# Findings in scripts another change is rewriting, each to be fixed there and then dropped from
# this list: FILE:CODE[,CODE].
pending=(
	".ci/run:SC2016"
	"hack/lab.sh:SC2100,SC2231"
	"hack/node-test.sh:SC2231"
)

scripts=()
while IFS= read -r -d '' f; do
	[[ -f $f ]] || continue
	if [[ $f == *.sh ]] || head -n1 -- "$f" | grep -qE '^#!.*\b(ba|da)?sh\b'; then
		scripts+=("$f")
	fi
done < <(git ls-files -z)
if ((${#scripts[@]} == 0)); then
	echo "shellcheck: no shell scripts found: is this a git clone?" >&2
	exit 1
fi

status=0
for p in "${pending[@]}"; do
	if [[ ! -f ${p%%:*} ]]; then
		echo "shellcheck: ${p%%:*} is gone: drop it from hack/shellcheck.sh's pending list" >&2
		status=1
	fi
done
for f in "${scripts[@]}"; do
	exclude=()
	for p in "${pending[@]}"; do
		[[ ${p%%:*} == "$f" ]] && exclude=(--exclude "${p#*:}")
	done
	# -x -P SCRIPTDIR: follow `source` (and its `# shellcheck source=` directive) relative to the
	# script, as the scripts themselves source their libraries.
	shellcheck -x -P SCRIPTDIR "${exclude[@]}" -- "$f" || status=1
done
if ((status == 0)); then
	echo "shellcheck: ${#scripts[@]} scripts, no findings"
fi
exit "$status"
