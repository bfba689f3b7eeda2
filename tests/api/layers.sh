#!/bin/sh
# A library's layers: its folders may use only the folders their rules name,
# and its files' link dependencies have no cycle.
#
# usage: layers.sh RULES SRC OBJECT...   (or RULES SRC and one ;-separated list)
#
# RULES is the file cmake/zccl_layers.cmake writes: a line "folder: used ..."
# per folder of SRC. File A uses file B when A's object uses a global symbol
# B's object defines (nm), or when A includes "folder/header" of SRC. A use
# across folders that the rules do not allow fails the check, printed with the
# symbols or the header. The file graph must be acyclic: a file's layer is 0
# when it uses no other file, else one more than the highest layer it uses;
# the layers are printed, and a cycle fails the check with the symbols of
# each step.
set -eu
[ $# -ge 3 ] || { echo "usage: layers.sh RULES SRC OBJECT..." >&2; exit 2; }
rules=$1
src=$2
shift 2
if [ $# -eq 1 ]; then
    # shellcheck disable=SC2086
    IFS=';' && set -- $1 && unset IFS
fi
{
    sed 's/^/R /' "$rules"
    for o in "$@"; do
        # .../src/FOLDER/file.c.o -> FOLDER/file
        f=$(echo "$o" | sed 's|.*/src/||; s/\.o$//; s/\.c$//')
        nm -g --defined-only "$o" | awk -v f="$f" 'NF == 3 { print "D", f, $3 }'
        nm -u "$o" | awk -v f="$f" '{ print "U", f, $NF }'
        echo "F $f -"
    done
    (cd "$src" && grep -H '^#include "[a-z_]*/' */*.[ch] || true) |
        sed 's|^\([^:]*\)\.[ch]:#include "\([^"]*\)".*|I \1 \2|'
} | awk '
function folder(x) { return substr(x, 1, index(x, "/") - 1) }
function allowed(a, b) { return a == b || ((a SUBSEP b) in may) }
$1 == "R" {
    sub(/:$/, "", $2)
    declared[$2] = 1
    uses[$2] = NF > 2 ? "" : "nothing"
    for (i = 3; i <= NF; i++) {
        may[$2 SUBSEP $i] = 1
        uses[$2] = uses[$2] (i > 3 ? " " : "") $i
    }
}
$1 == "F" { file[$2] = 1; nf++ }
$1 == "D" { def[$3] = $2 }
$1 == "U" { use[++nu] = $2 SUBSEP $3 }
$1 == "I" { inc[++ni] = $2 SUBSEP $3 }
END {
    bad = 0
    for (f in file) {
        if (!(folder(f) in declared)) {
            printf "layers: %s lies in no declared folder\n", f
            bad = 1
        }
    }
    for (i = 1; i <= ni; i++) {
        split(inc[i], p, SUBSEP)
        if ((folder(p[2]) in declared) && !allowed(folder(p[1]), folder(p[2]))) {
            printf "layers: upward include: %s includes %s (%s may use: %s)\n", p[1], p[2],
                folder(p[1]), uses[folder(p[1])]
            bad = 1
        }
    }
    for (i = 1; i <= nu; i++) {
        split(use[i], p, SUBSEP)
        if (!(p[2] in def) || def[p[2]] == p[1]) {
            continue
        }
        e = p[1] SUBSEP def[p[2]]
        if (!(e in edge)) {
            edge[e] = p[2]
        } else if (length(edge[e]) < 60) {
            edge[e] = edge[e] " " p[2]
        }
    }
    for (e in edge) {
        split(e, p, SUBSEP)
        if (!allowed(folder(p[1]), folder(p[2]))) {
            printf "layers: upward use: %s -> %s (%s) (%s may use: %s)\n", p[1], p[2], edge[e],
                folder(p[1]), uses[folder(p[1])]
            bad = 1
        }
    }
    if (bad) {
        exit 1
    }
    for (f in file) {
        level[f] = 0
    }
    # Longest path by relaxation: it settles within nf rounds unless there is a cycle.
    for (round = 0; round <= nf; round++) {
        changed = 0
        for (e in edge) {
            split(e, p, SUBSEP)
            if (level[p[1]] < level[p[2]] + 1) {
                level[p[1]] = level[p[2]] + 1
                changed = 1
            }
        }
        if (!changed) {
            break
        }
    }
    if (changed) {
        # Walk from a file above the bound through files above it until one repeats.
        for (f in level) {
            if (level[f] > nf) {
                x = f
                break
            }
        }
        while (!(x in seen)) {
            seen[x] = 1
            for (e in edge) {
                split(e, p, SUBSEP)
                if (p[1] == x && level[p[2]] > nf) {
                    next_of[x] = p[2]
                    break
                }
            }
            x = next_of[x]
        }
        print "layers: cycle:"
        y = x
        do {
            printf "  %s -> %s (%s)\n", y, next_of[y], edge[y SUBSEP next_of[y]]
            y = next_of[y]
        } while (y != x)
        exit 1
    }
    top = 0
    for (f in level) {
        if (level[f] > top) {
            top = level[f]
        }
    }
    for (k = 0; k <= top; k++) {
        line = ""
        for (f in level) {
            if (level[f] == k) {
                line = line " " f
            }
        }
        n = split(substr(line, 2), names, " ")
        # insertion sort: a stable listing
        for (i = 2; i <= n; i++) {
            v = names[i]
            for (j = i - 1; j >= 1 && names[j] > v; j--) {
                names[j + 1] = names[j]
            }
            names[j + 1] = v
        }
        line = ""
        for (i = 1; i <= n; i++) {
            line = line " " names[i]
        }
        printf "layer %d:%s\n", k, line
    }
    printf "layers: %d files, %d dependencies, no cycle, no upward use\n", nf, length(edge)
}'
