#!/usr/bin/env bash
# The queue's daily jobs timed (README "The queue's daily jobs"): ggml-patch topic import, move,
# drop, rename and retire in a copy of the project, beside git cherry-pick / rebase -i and quilt
# (when installed) on the same changes. Each job once, wall time. Writes only under a temp dir.
# Usage: scripts/bench-daily-jobs.sh [PYTHON]   (default: .venv/bin/python of this checkout)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${1:-$ROOT/.venv/bin/python}
B=$(mktemp -d "${TMPDIR:-/tmp}/daily-jobs.XXXXXX")
trap 'rm -rf "$B"' EXIT
export GIT_AUTHOR_NAME=Alice GIT_AUTHOR_EMAIL=alice@example.org
export GIT_COMMITTER_NAME=Alice GIT_COMMITTER_EMAIL=alice@example.org
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
mkdir "$B/proj" && cp -r "$ROOT/patches" "$ROOT/native_tests" "$ROOT/matrix.yaml" "$B/proj/"
mkdir -p "$B/fork/ggml/src" "$B/fork/tests" && cd "$B/fork"
for i in $(seq 1 40); do echo "int f$i(void) { return $i; }"; done > ggml/src/ggml-opt.cpp
echo "int main(void) { return 0; }" > tests/test-opt.cpp
git init -q -b master && git add . && git commit -qm base
sed -i 's/return 3;/return 33;/' ggml/src/ggml-opt.cpp && echo "// f3" >> tests/test-opt.cpp
git commit -qam "ggml-opt : f3"
sed -i 's/return 30;/return 300;/' ggml/src/ggml-opt.cpp && echo "// f30" >> tests/test-opt.cpp
GIT_AUTHOR_NAME=Bob GIT_AUTHOR_EMAIL=bob@example.org git commit -qam "ggml-opt : f30"
t() {  # t LABEL COMMAND...: one line, the wall time of COMMAND
    local label=$1 s e; shift
    s=$(date +%s.%N); "$@" > /dev/null; e=$(date +%s.%N)
    awk -v l="$label" -v s="$s" -v e="$e" 'BEGIN { printf "%-34s %6.2f s\n", l, e - s }'
}
G=("$PY" -m orchestrator topic) M=(--matrix "$B/proj/matrix.yaml" --cache "$B/cache")
cd "$B/proj"
"$PY" -m orchestrator --version > /dev/null  # byte code compiled (where allowed), as once installed
t "ggml-patch topic import" "${G[@]}" import HEAD~2..HEAD --repo "$B/fork" "${M[@]}"
t "ggml-patch topic move" "${G[@]}" move ggml-opt-f3 --before accumulator-reset "${M[@]}"
t "ggml-patch topic drop" "${G[@]}" drop ggml-opt-f30 "${M[@]}"
t "ggml-patch topic rename" "${G[@]}" rename ggml-opt-f3 f3 "${M[@]}"
t "ggml-patch topic retire --target" "${G[@]}" retire f3 --target ggml-master "${M[@]}"
git clone -q "$B/fork" "$B/g" && cd "$B/g" && git reset -q --hard HEAD~2
for i in 1 2 3; do echo "// $i" > "t$i.c" && git add "t$i.c" && git commit -qm "topic $i"; done
export GIT_EDITOR=true
t "git cherry-pick A..B" git cherry-pick origin/master~2..origin/master
t "git rebase -i (reorder)" env GIT_SEQUENCE_EDITOR="sed -i '1{h;d};2{G}'" git rebase -q -i HEAD~5
t "git rebase -i (drop)" env GIT_SEQUENCE_EDITOR="sed -i '1s/^pick/drop/'" git rebase -q -i HEAD~5
command -v quilt > /dev/null || { echo "quilt: not installed"; exit 0; }
git clone -q "$B/fork" "$B/q" && cd "$B/q" && git reset -q --hard HEAD~2
git -C "$B/fork" format-patch -q -o "$B/q/in" HEAD~2..HEAD
export QUILT_PATCHES=patches
t "quilt import (2 patches)" quilt import in/0001-ggml-opt-f3.patch in/0002-ggml-opt-f30.patch
t "quilt delete -r" quilt delete -r 0002-ggml-opt-f30.patch
t "quilt rename -P" quilt rename -P 0001-ggml-opt-f3.patch f3.patch
