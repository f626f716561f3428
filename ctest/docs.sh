#!/usr/bin/env bash
# The facts the documentation repeats, checked against their one source, so
# that they cannot drift apart again:
#   - the deliberate differences from rdma-core: the same tagged items in
#     docs/usage.md (the list) and rsverbs(7) ("difference: TAG");
#   - rsverbs' own exports: src/rsverbs.map (the only version script) against
#     CHANGELOG.md's node table, docs/building.md's, debian/librsverbs1.symbols
#     and include/rsverbs.h;
#   - rdma-core's five names in every list of them that says "five";
#   - every relative link of the Markdown pages (README, docs/, examples/,
#     ctest/, testbed/) reaches a file, and its #anchor a heading there;
#   - docs/README.md links every page of docs/; every page about a symptom
#     links docs/troubleshooting.md;
#   - the README's first screen: no timings or pass counts before "## Install".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=ctest/lib.sh
source ctest/lib.sh

# --- deliberate differences ---------------------------------------------
tags() { grep -o 'difference: [a-z0-9-]*' "$1" | sort -u | tr '\n' ' '; }
u=$(tags docs/usage.md) m=$(tags docs/man/rsverbs.7)
check "the deliberate differences: docs/usage.md and rsverbs(7) have the same tags ($u)" test -n "$u" -a "$u" = "$m"
check "the README links the list instead of repeating it" grep -q 'docs/usage.md#deliberate-differences-from-rdma-core' README.md

# --- exports --------------------------------------------------------------
map_fns=$(grep -o 'rsverbs_[a-z_]*;' src/rsverbs.map | tr -d ';' | sort -u | tr '\n' ' ')
# map_nodes: "NODE fn fn ..." per RSVERBS node, from the version script.
map_nodes=$(awk '/^RSVERBS_[0-9.]* \{/ { n = $1 } n && /rsverbs_[a-z_]*;/ { gsub(/[ ;]/, ""); f[n] = f[n] " " $0 }
  END { for (k in f) print k f[k] }' src/rsverbs.map | sort)
# table_nodes FILE: the same from a Markdown table whose rows start "| `RSVERBS_0.N` |".
table_nodes() {
  grep '^| `RSVERBS_[0-9.]*` |' "$1" | while IFS='|' read -r _ node fns _; do
    node=$(tr -d ' `' <<< "$node")
    printf '%s %s\n' "$node" "$(grep -o 'rsverbs_[a-z_]*' <<< "$fns" | sort | tr '\n' ' ' | sed 's/ $//')"
  done | sort
}
sorted_map=$(while read -r node fns; do printf '%s %s\n' "$node" "$(tr ' ' '\n' <<< "$fns" | sort | tr '\n' ' ' | sed 's/^ //; s/ $//')"; done <<< "$map_nodes")
check "the exports: src/rsverbs.map has rsverbs_* functions ($(wc -w <<< "$map_fns"))" test "$(wc -w <<< "$map_fns")" -gt 0
for f in CHANGELOG.md docs/building.md; do
  check "the exports: $f's node table is src/rsverbs.map's" test "$(table_nodes "$f")" = "$sorted_map"
done
sym_fns=$(grep -o '^ rsverbs_[a-z_]*@' debian/librsverbs1.symbols | tr -d ' @' | sort -u | tr '\n' ' ')
check "the exports: debian/librsverbs1.symbols lists src/rsverbs.map's functions" test "$sym_fns" = "$map_fns"
hdr_fns=$(grep -o '^[a-z].* \**\(rsverbs_[a-z_]*\)(' include/rsverbs.h | grep -o 'rsverbs_[a-z_]*(' | tr -d '(' | sort -u | tr '\n' ' ')
check "the exports: include/rsverbs.h declares src/rsverbs.map's functions" test "$hdr_fns" = "$map_fns"

# --- rdma-core's five names -----------------------------------------------
five="ibv_attach_mcast ibv_detach_mcast ibv_query_gid _ibv_query_gid_ex _ibv_query_gid_table"
for f in debian/control docs/usage.md docs/man/rsverbs.7 CHANGELOG.md docs/trace.md; do
  missing=""
  for v in $five; do grep -q -- "$v\b" "$f" || missing="$missing $v"; done
  check "$f names all five verbs${missing:+ (missing:$missing)}" test -z "$missing"
done
# Every Description of debian/control that names a verb names the five.
bad=$(awk '/^Package:/ { p = $2 } /ibv_attach_mcast/ { n[p] = 1 } /_ibv_query_gid_table/ { t[p] = 1 }
  END { for (k in n) if (!t[k]) print k }' debian/control)
check "debian/control: every package that names a verb names all five${bad:+ (not: $bad)}" test -z "$bad"

# --- links ------------------------------------------------------------------
# slug TEXT: GitHub's anchor of a heading: lower case, punctuation but - and _
# dropped, spaces to -.
slug() { tr 'A-Z' 'a-z' <<< "$1" | sed 's/[^a-z0-9 _-]//g; s/ /-/g'; }
anchors() { grep '^#' "$1" | sed 's/^#* *//' | while IFS= read -r h; do slug "$h"; done; }
pages=$(ls README.md CHANGELOG.md docs/*.md examples/README.md ctest/README.md testbed/README.md 2>/dev/null)
broken=""
for p in $pages; do
  dir=$(dirname "$p")
  while IFS= read -r l; do
    target=${l%%#*} anchor=""
    [[ $l == *"#"* ]] && anchor=${l#*#}
    [ -n "$target" ] && file=$dir/$target || file=$p
    if [ ! -e "$file" ]; then broken="$broken $p->$l"; continue; fi
    if [ -n "$anchor" ] && [[ $file == *.md ]] && ! grep -qx -- "$anchor" <<< "$(anchors "$file")"; then
      broken="$broken $p->$l"
    fi
  done < <(grep -o '](\([^)]*\))' "$p" | sed 's/^](//; s/)$//' | grep -v '^[a-z]*:' | grep -v '^$')
done
check "every relative link and anchor of the Markdown pages resolves${broken:+ (broken:$broken)}" test -z "$broken"
unlisted=""
for d in docs/*.md; do
  [ "$d" = docs/README.md ] && continue
  grep -q "]($(basename "$d"))" docs/README.md || unlisted="$unlisted $d"
done
check "docs/README.md links every page of docs/${unlisted:+ (not:$unlisted)}" test -z "$unlisted"
for d in docs/trace.md docs/usage.md docs/ipjoin.md docs/fabric-join.md docs/tool.md README.md; do
  check "$d links the troubleshooting page" grep -q 'troubleshooting.md' "$d"
done

# --- the README's first screen ---------------------------------------------
head_part=$(sed '/^## Install/q' README.md)
check "README: what, a hint example and install come first (## Install within 60 lines)" \
  test "$(grep -n '^## Install' README.md | cut -d: -f1)" -le 60
check "README: no timings or pass counts before ## Install" \
  bash -c '! grep -Eq "[0-9] passed|[0-9,]+ s\b|[0-9]+ seconds|minutes" <<< "$1"' _ "$head_part"
finish
