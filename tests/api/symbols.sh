#!/bin/sh
# The exported symbols of a shared library against its headers.
#
# usage: symbols.sh CC LIBRARY "INCLUDE FLAGS" "PUBLIC HEADERS" "PRIVATE HEADERS"
#
# Every function declared in a public header must be exported in the public
# version node ZCCL_0; every exported symbol must be either a public function
# (node ZCCL_0) or a function or extern variable declared in one of the
# private headers (node ZCCL_PRIVATE_1, zccl's own libraries, tools and
# tests); nothing else, and nothing unversioned. Declarations are read from the preprocessed header
# (only the header's own lines, not what it includes; static inline functions,
# typedefs and bodies left out).
set -eu
cc=$1
lib=$2
inc=$3
pub=$4
priv=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The functions a header declares, one name a line.
decls() {
    want=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    # shellcheck disable=SC2086
    # __attribute__ defined away: a declaration's first "name(" is its function.
    echo "#include \"$want\"" | "$cc" -E '-D__attribute__(x)=' $inc -x c - |
        awk -v want="$want" '
            /^# [0-9]+ "/ { f = $3; gsub(/"/, "", f); keep = (f == want); next }
            keep { print }' |
        tr '\n' ' ' | sed -e ':a' -e 's/{[^{}]*}/;/g' -e 'ta' | tr ';' '\n' |
        grep -v -w -e typedef -e static -e _Static_assert |
        sed -n -e '/^[[:space:]]*extern[^(]*$/s/.*[^A-Za-z0-9_]\([A-Za-z_][A-Za-z0-9_]*\)[][0-9[:space:]]*$/\1/p' \
            -e 's/^[^(]*[^A-Za-z0-9_(]\([A-Za-z_][A-Za-z0-9_]*\)[[:space:]]*(.*/\1/p'
}

: >"$tmp/pub"
for h in $pub; do decls "$h" >>"$tmp/pub.raw"; done
: >"$tmp/priv"
for h in $priv; do decls "$h" >>"$tmp/priv.raw"; done
sort -u "$tmp/pub.raw" >"$tmp/pub" 2>/dev/null || true
sort -u "$tmp/priv.raw" >"$tmp/priv" 2>/dev/null || true

nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' | sort -u >"$tmp/exported"
fail=0
npub=0
npriv=0
while read -r name; do
    if ! grep -q -x "$name@@ZCCL_0" "$tmp/exported"; then
        echo "FAIL: $name is declared in a public header but not exported in ZCCL_0"
        fail=1
    fi
done <"$tmp/pub"
while read -r sym; do
    name=${sym%%@*}
    node=${sym#*@@}
    [ "$node" = "$sym" ] && node="(unversioned)"
    case $node in
    ZCCL_0)
        if grep -q -x "$name" "$tmp/pub"; then
            npub=$((npub + 1))
        else
            echo "FAIL: $name is exported in ZCCL_0 but no public header declares it"
            fail=1
        fi
        ;;
    ZCCL_PRIVATE_1)
        if grep -q -x "$name" "$tmp/priv" && ! grep -q -x "$name" "$tmp/pub"; then
            npriv=$((npriv + 1))
        else
            echo "FAIL: $name is exported in ZCCL_PRIVATE_1 but no private header declares it"
            fail=1
        fi
        ;;
    *)
        echo "FAIL: $name is exported in $node (only ZCCL_0 and ZCCL_PRIVATE_1 may export)"
        fail=1
        ;;
    esac
done <"$tmp/exported"
echo "$(basename "$lib"): $npub public (ZCCL_0), $npriv private (ZCCL_PRIVATE_1), \
$(wc -l <"$tmp/pub") public declarations"
exit $fail
