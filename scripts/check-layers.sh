#!/usr/bin/env bash
# check-layers.sh - checks the rule of service/layers.mk on the built objects.
#
#   make layers-check      (run by make test through scripts/run-tests.sh)
#   scripts/check-layers.sh OBJDIR OBJECT...   (what make layers-check runs)
#
# The Makefile already compiles each folder with -I for the folders it may
# use only; this checks what the compiler cannot see:
#
#   1. calls: every symbol an object uses from another folder is defined in
#      a folder the rule allows, or is a port's function (declared in
#      service/ports/*.h) defined by an adapter, or an open exception;
#   2. no two modules (objects) call each other, and no ring of modules
#      does (a calls b, b calls c, c calls a);
#   3. the include paths the Makefile gives each folder refuse a header of
#      every folder the rule does not allow (one probe per pair);
#   4. no header name is in two folders (headers are included by bare name);
#   5. every open exception is still needed, so the list only shrinks.
#
# The rule arrives from make (LAYER_RULES, LAYER_ADAPTERS, LAYER_EXCEPTIONS,
# LAYER_FLAGS), so it is written in service/layers.mk only. Prints one line
# per breach and exits 1 when there is any.
set -uo pipefail

# OBJDIR and the objects of the service's current sources (a stale object
# of a removed file must not count).
obj=${1:?usage: check-layers.sh OBJDIR OBJECT...}
shift
cc=${CC:-cc}
cd "$(dirname "$0")/.."

breaches=0
breach() {
    echo "layers: $*"
    breaches=$((breaches + 1))
}

declare -A may flags
for r in ${LAYER_RULES:?}; do
    may[${r%%:*}]=" $(tr ',' ' ' <<<"${r#*:}") "
done
for r in ${LAYER_FLAGS:?}; do
    flags[${r%%:*}]=$(tr ',' ' ' <<<"${r#*:}")
done
adapters=" ${LAYER_ADAPTERS:?} "
exceptions=" ${LAYER_EXCEPTIONS:-} "

# A module's folder: folder/name -> folder; main.c is main.
folder_of() { [[ $1 == */* ]] && echo "${1%%/*}" || echo main; }

objects=("$@")
declare -A used
if [[ ${#objects[@]} -eq 0 ]]; then
    breach "no objects under $obj (build first)"
    exit 1
fi

# Every object's global symbols, "module type symbol", in one nm run; awk
# joins the uses to the definitions.
ports_words=$(grep -ohE '\b[A-Za-z_][A-Za-z0-9_]*\b' service/ports/*.h | sort -u | tr '\n' ' ')
rules=$(for f in "${!may[@]}"; do printf '%s=%s;' "$f" "${may[$f]}"; done)
report=$(nm -A -g "${objects[@]}" | awk -v obj="$obj/" -v rules="$rules" -v adapters="$adapters" \
    -v exceptions="$exceptions" -v portwords=" $ports_words " '
    function folder(m) { return index(m, "/") ? substr(m, 1, index(m, "/") - 1) : "main" }
    function has(list, w) { return index(list, " " w " ") > 0 }
    # Depth first from v over the calls no exception covers: a call back
    # to a module on the path closes a ring. Rings of two are the pair
    # check below; every ring of modules that has none contains a longer
    # ring this finds.
    function ring(v,    i, w, j, s) {
        state[v] = 1; path[++depth] = v; at[v] = depth
        for (i = 1; i <= nout[v]; i++) {
            w = out[v, i]
            if (state[w] == 1 && depth - at[w] >= 2) {
                s = ""
                for (j = at[w]; j <= depth; j++) s = s path[j] " -> "
                print "breach a ring of modules calls itself: " s w
            } else if (state[w] == 0) {
                ring(w)
            }
        }
        state[v] = 2; depth--
    }
    # The open exception that lets module a use module b, or "".
    function exc(a, b,    fa, fb) {
        fa = folder(a); fb = folder(b)
        if (has(exceptions, a ":" b)) return a ":" b
        if (has(exceptions, a ":" fb)) return a ":" fb
        if (has(exceptions, fa ":" b)) return fa ":" b
        if (has(exceptions, fa ":" fb)) return fa ":" fb
        return ""
    }
    BEGIN {
        n = split(rules, r, ";")
        for (i = 1; i <= n; i++)
            if (r[i] != "") { split(r[i], kv, "="); may[kv[1]] = kv[2] }
        crossing = 0
    }
    {
        file = $1; sub(/\.o:.*$/, "", file); sub("^" obj, "", file)
        m = index(file, "/") ? file : "main"
        if ($2 == "U") { uses[++nu] = m " " $3; next }
        if (NF == 3) owner[$3] = m
    }
    END {
        for (i = 1; i <= nu; i++) {
            split(uses[i], u, " "); a = u[1]; sym = u[2]
            if (!(sym in owner)) continue
            b = owner[sym]; if (b == a) continue
            if (!((a SUBSEP b) in calls)) calls[a, b] = sym
            fa = folder(a); fb = folder(b)
            if (fa == fb) continue
            crossing++
            if (fa == "main" || has(may[fa], fb)) continue
            if (has(may[fa], "ports") && has(adapters, fb) && has(portwords, sym)) continue
            hit = exc(a, b)
            if (hit != "") { print "used " hit; continue }
            print "breach " a " uses " sym ", defined in " b ": " fa " may not use " fb " (service/layers.mk)"
        }
        for (k in calls) {
            split(k, ab, SUBSEP); a = ab[1]; b = ab[2]
            if (!(a < b) || !((b SUBSEP a) in calls)) continue
            hit = exc(a, b)
            if (hit == "") hit = exc(b, a)
            if (hit != "") { print "used " hit; continue }
            print "breach " a " and " b " call each other (" a " uses " calls[a, b] ", " b " uses " calls[b, a] ")"
        }
        for (k in calls) {
            split(k, ab, SUBSEP)
            if (exc(ab[1], ab[2]) == "" && exc(ab[2], ab[1]) == "") out[ab[1], ++nout[ab[1]]] = ab[2]
            mods[ab[1]] = 1
        }
        depth = 0
        for (v in mods)
            if (state[v] == 0) ring(v)
        print "crossing " crossing
    }')
crossing=$(sed -n 's/^crossing //p' <<<"$report")
while read -r e; do
    [[ -n $e ]] && used[$e]=1
done < <(sed -n 's/^used //p' <<<"$report")
while read -r line; do
    [[ -n $line ]] && breach "$line"
done < <(sed -n 's/^breach //p' <<<"$report")

# The build's include paths refuse what the rule refuses.
probes=0
for fa in "${!flags[@]}"; do
    for dir in service/*/; do
        fb=$(basename "$dir")
        [[ $fb == "$fa" || ${may[$fa]} == *" $fb "* ]] && continue
        # A whole folder's open exception opens its include path too.
        [[ $exceptions == *" $fa:$fb "* || $exceptions == *" $fa:$fb/"* ]] && continue
        h=$(find "$dir" -maxdepth 1 -name '*.h' | sort | head -1)
        [[ -z $h ]] && continue
        probes=$((probes + 1))
        # shellcheck disable=SC2086
        if printf '#include "%s"\n' "$(basename "$h")" |
            "$cc" -E -x c ${flags[$fa]} - >/dev/null 2>&1; then
            breach "$fa's include path finds $h, but $fa may not use $fb"
        fi
    done
done

while read -r n name; do
    [[ $n -gt 1 ]] && breach "$name is in $n folders; headers are included by bare name"
done < <(find service -name '*.h' -printf '%f\n' | sort | uniq -c)

for e in $exceptions; do
    [[ -n ${used[$e]:-} ]] && continue
    # An exception may also be needed only by the include path (metrics.c
    # including router.h): the compile then still needs it.
    from=${e%%:*}
    to=${e#*:}
    for src in service/$from.c service/$from/*.c; do
        [[ -f $src ]] || continue
        for hdr in $(sed -n 's/^#include "\(.*\)"/\1/p' "$src"); do
            [[ -f service/$(folder_of "$to")/$hdr ]] && used[$e]=1
        done
    done
    [[ -n ${used[$e]:-} ]] || breach "exception $e is not needed any more: remove it from service/layers.mk"
done

if [[ $breaches -gt 0 ]]; then
    echo "layers: $breaches breaches"
    exit 1
fi
echo "layers: ok (${#objects[@]} objects, $crossing cross-folder references, $probes wrong includes refused)"
