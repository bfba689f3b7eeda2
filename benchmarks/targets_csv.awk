# Shared by targets.awk and targets_runs.awk (awk -F, -f targets_csv.awk -f
# targets.awk FILE.csv...): columns found by the tools' CSV header names,
# and the verdict line.

function verdict(ok, text) {
    printf "%-6s %s\n", ok ? "MET" : "MISSED", text
    if (!ok) {
        missed++
    }
}

FNR == 1 {
    delete col
    for (i = 1; i <= NF; i++) {
        col[$i] = i
    }
    next
}

function v(name) {
    return (name in col) ? $(col[name]) : ""
}

# The op as the targets name it: "AllReduce", or "AllReduce(bfloat16)" for a
# type other than float, so each type's rows form groups of their own.
function opname() {
    return v("type") == "float" || v("type") == "" ? v("op") : v("op") "(" v("type") ")"
}
