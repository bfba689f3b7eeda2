#!/usr/bin/env bash
# The formatting check of every C/C++ file in the tree (.clang-format):
#   scripts/format.sh       fail, listing each file clang-format would change
#   scripts/format.sh -i    reformat those files in place
# Files come from git (tracked and untracked, not ignored), so build trees and
# generated files (zccl/version.h lives in the build tree) are never checked.
# The formatting is clang-format 14's (Debian 12, installed by scripts/deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
        '*.c' '*.h' '*.cc' '*.cpp' '*.hpp' | sort -u)
else
    # Not a git checkout: every source file outside build trees and out/.
    mapfile -t files < <(find . \( -name .git -o -name 'build*' -o -name out \) -prune -o \
        -type f \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cpp' -o \
        -name '*.hpp' \) -print | sed 's|^\./||' | sort)
fi
if [ "${1:-}" = "-i" ]; then
    clang-format -i "${files[@]}"
    exit 0
fi
bad=()
for f in "${files[@]}"; do
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
        bad+=("$f")
    fi
done
if [ ${#bad[@]} -ne 0 ]; then
    echo "format: ${#bad[@]} of ${#files[@]} C/C++ files differ from .clang-format" \
        "(scripts/format.sh -i fixes them):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
fi
echo "format: ${#files[@]} C/C++ files match .clang-format"
