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
