#!/usr/bin/env bash
# The README and docs/ against the code and against each other (issue 37): the README stays short; every relative
# link resolves; the recipe sizes the README and the recipes' headers quote are the ones recipes/lib.sh and the
# scale lines set; the quickstart's duration is quoted alike; and every number in the README's tables comes from
# the pages that say where it was measured (docs/results.md, docs/recall.md, docs/models.md). The embedded models'
# metrics are checked against their metrics.json by tests/test_embedded.cpp.   docs_test.sh SOURCE_DIR
set -euo pipefail
src=$1
readme=$src/README.md
fail() { echo "docs_test: $*" >&2; exit 1; }

lines=$(wc -l <"$readme")
(( lines <= 150 )) || fail "README.md has $lines lines: at most 150 (details belong in docs/)"

# links: [text](target) with a relative target must name an existing file or folder
for f in "$readme" "$src"/docs/*.md; do
  while read -r target; do
    [[ -z $target || $target == http* || $target == mailto:* ]] && continue
    [[ -e $(dirname "$f")/$target ]] || fail "${f#"$src"/} links to '$target', which does not exist"
  done < <(grep -oE '\]\([^) ]+\)' "$f" | sed -E 's/^\]\(//; s/\)$//; s/#.*$//')
done

# the quick-scale sizes: recipes/lib.sh's defaults
default() {
  local v
  v=$(grep -oE "\b$1=\\\$\{$1:-[0-9]+\}" "$src/recipes/lib.sh" | head -1 | grep -oE '[0-9]+\}$' | tr -d '}')
  [[ -n $v ]] || fail "recipes/lib.sh sets no default for $1"
  echo "$v"
}
rec="$(default REC_SAMPLES) × $(default REC_LEN)"
ft="$(default FT_STEPS) steps × $(default FT_BATCH) × $(default FT_LEN)"
epochs="$(default EPOCHS) epochs"
for want in "$rec" "$ft" "$epochs"; do
  grep -qF "$want" "$readme" || fail "README.md does not quote the quickstart's '$want' (recipes/lib.sh)"
done
# every "N steps × B × L" the README or a recipe header's quick line quotes is lib.sh's
quoted() { grep -oE '[0-9]+ (finetuning )?steps × [0-9]+ × [0-9]+' | sed 's/finetuning //'; }
while read -r q; do [[ $q == "$ft" ]] || fail "README.md quotes '$q', recipes/lib.sh sets '$ft'"; done < <(quoted <"$readme")
for r in quickstart gpt2-hedgehog; do
  header=$(sed -n '2,/^[^#]/p' "$src/recipes/$r.sh" | grep '^#' | grep -v 'SCALE=full')
  while read -r q; do [[ $q == "$ft" ]] || fail "recipes/$r.sh's header quotes '$q', recipes/lib.sh sets '$ft'"; done < <(quoted <<<"$header")
  quoted <<<"$header" | grep -qxF "$ft" || fail "recipes/$r.sh's header does not quote '$ft'"
done
# the full scale: gpt2-hedgehog.sh's header against its own SCALE=full line
full=$(grep -E '^if \[\[ \$SCALE == full \]\]' "$src/recipes/gpt2-hedgehog.sh")
val() { grep -oE "\b$1=[0-9]+" <<<"$full" | cut -d= -f2; }
full_header=$(grep -E '^#.*SCALE=full' "$src/recipes/gpt2-hedgehog.sh")
for want in "$(val REC_SAMPLES) × $(val REC_LEN) recorded" "$(val FT_STEPS) steps × $(val FT_BATCH) × $(val FT_LEN)"; do
  grep -qF "$want" <<<"$full_header" || fail "recipes/gpt2-hedgehog.sh's SCALE=full header does not quote '$want'"
done

# the quickstart's duration: the README and the recipe's header say the same
dur() { grep -oE 'about [0-9½]+ minutes' | head -1; }
r_dur=$(grep -E 'tools/quickstart.sh' "$readme" | dur)
q_dur=$(sed -n 2p "$src/recipes/quickstart.sh" | dur)
[[ -n $r_dur && $r_dur == "$q_dur" ]] || fail "the quickstart takes '$r_dur' in README.md but '$q_dur' in recipes/quickstart.sh"

# every decimal number in the README's tables appears on a page that says where it comes from
sources=$(cat "$src/docs/results.md" "$src/docs/recall.md" "$src/docs/models.md")
while read -r num; do
  grep -qF -- "$num" <<<"$sources" || fail "README.md's table number $num is in none of docs/results.md, recall.md, models.md"
done < <(grep -E '^\|' "$readme" | grep -oE '[0-9][0-9,]*\.[0-9]+' | sort -u)
# every test the README and docs/ name as what checks a claim (`Suite.NameAsASentence`, `Suite.Prefix*`) exists: a
# GoogleTest TEST(Suite, Name) under tests/ or a ctest add_test(NAME Suite.Name)
have=$( (grep -rhoE 'TEST(_F)?\([A-Za-z0-9_]+, *[A-Za-z0-9_]+\)' "$src/tests" | sed -E 's/TEST(_F)?\(([A-Za-z0-9_]+), *([A-Za-z0-9_]+)\)/\2.\3/'
         grep -hoE 'add_test\(NAME [A-Za-z0-9_.]+' "$src/tests/CMakeLists.txt" | sed 's/add_test(NAME //') | sort -u)
named=0
while read -r t; do
  named=$((named + 1))
  if [[ $t == *'*' ]]; then grep -q "^${t%\*}" <<<"$have" || fail "a doc names the tests $t, which match none"
  else grep -qxF "$t" <<<"$have" || fail "a doc names the test $t, which does not exist"; fi
done < <(cat "$readme" "$src"/docs/*.md | grep -ohE '`[A-Z][A-Za-z0-9]*\.[A-Z][A-Za-z0-9_]{14,}\*?`' | tr -d '`' | sort -u)
(( named > 20 )) || fail "only $named tests named in the docs: the pattern that finds them no longer matches"
echo "docs_test: README ($lines lines) and docs agree; the $named tests they name exist"
