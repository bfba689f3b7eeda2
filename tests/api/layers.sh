#!/bin/sh
# The layers of a library's source files, and a check that they have no cycle.
#
# usage: layers.sh OBJECT...   (or one argument holding a ;-separated list)
#
# File A depends on file B when A's object uses a global symbol B's object
# defines (nm). That graph must be acyclic: a file's layer is 0 when it uses
# no other file, else one more than the highest layer it uses, and the list of
# layers is printed. A cycle fails the check, printed with the symbols that
# make each step of it.
set -eu
if [ $# -eq 1 ]; then
    # shellcheck disable=SC2086
    IFS=';' && set -- $1 && unset IFS
fi
[ $# -gt 0 ] || { echo "usage: layers.sh OBJECT..." >&2; exit 2; }
for o in "$@"; do
    f=$(basename "$o" | sed 's/\.o$//; s/\.c$//')
    nm -g --defined-only "$o" | awk -v f="$f" 'NF == 3 { print "D", f, $3 }'
    nm -u "$o" | awk -v f="$f" '{ print "U", f, $NF }'
    echo "F $f -"
done | awk '
$1 == "F" { file[$2] = 1; nf++ }
$1 == "D" { def[$3] = $2 }
$1 == "U" { use[++nu] = $2 SUBSEP $3 }
END {
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
            seen[x] = ++step
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
    printf "layers: %d files, %d dependencies, no cycle\n", nf, length(edge)
}'
