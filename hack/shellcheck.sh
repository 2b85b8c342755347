#!/usr/bin/env bash
# Runs shellcheck on every shell script git tracks: *.sh files and files whose first line runs a
# shell (.ci/run, hack/git-hooks/*). Any finding, of any severity, fails it. `make lint` runs it;
# run it alone from anywhere in the clone. shellcheck comes from Debian's package
# (hack/install-test-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v shellcheck >/dev/null; then
	echo "shellcheck: not installed (apt-get install shellcheck, or hack/install-test-deps.sh)" >&2
	exit 1
fi

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
for f in "${scripts[@]}"; do
	# -x -P SCRIPTDIR: follow `source` (and its `# shellcheck source=` directive) relative to the
	# script, as the scripts themselves source their libraries.
	shellcheck -x -P SCRIPTDIR -- "$f" || status=1
done
if ((status == 0)); then
	echo "shellcheck: ${#scripts[@]} scripts, no findings"
fi
exit "$status"
