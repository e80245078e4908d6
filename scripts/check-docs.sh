#!/usr/bin/env bash
# check-docs.sh — the documentation rules, checked: README.md, docs/, src/ and cuda/ carry no history words
# (dates, tracker numbers, "this machine", "this session", run/session ordinals, "re-measured"), and no
# reference that resolves outside the repository (the old DESIGN/RECIPES documents, ../shared, /work/) or
# to a README section (README "..."; the details live in docs/);
# dates are allowed only in the caption lines of docs/ tables (lines that start with "Measured " or
# "Predicted "). README.md has at most 300 lines, and every relative link in README.md and docs/*.md
# names a file or folder that exists.
#   scripts/check-docs.sh        prints every hit as FILE:LINE:TEXT; exit 0 when there is none, 1 otherwise
set -u
cd "$(dirname "$0")/.."
where=(README.md docs src cuda)
bad=0

# history words (case-insensitive)
words='this machine|this session|(earlier|previous|next|last|first|second|third|fourth) session|[0-9]{4}-[0-9]{2}-[0-9]{2}'
words+='|\b(issue|task|ticket|tracker)s? ?#?[0-9]|(^|[^&[:alnum:]/_])#[0-9]+\b'
# a standard's number is not a tracker's: Unicode's annexes (UAX #15), RFCs
words+='|\b(second|third|fourth|fifth|sixth) (run|session)\b|\b[0-9]+(st|nd|rd|th) (run|session)\b'
words+='|re-?measured|before this change|measured here|(faster|slower) here\b'
# references outside the repository, and to README sections (the details live in docs/) (case-sensitive)
refs='DESIGN( section|:|\.md)|RECIPES|\.\./shared|/work/|README "'

hits=$( { grep -rnIEi "$words" "${where[@]}"; grep -rnIE "$refs" "${where[@]}"; } 2>/dev/null \
        | grep -vE '^docs/[^:]+:[0-9]+:(Measured|Predicted) ' | grep -vE '(UAX|UTS|UTR) #[0-9]+' \
        | LC_ALL=C sort -u -t: -k1,1 -k2,2n)
if [ -n "$hits" ]; then
  echo "check-docs: history words or references outside the repository:"
  echo "$hits"
  bad=1
fi

lines=$(wc -l < README.md)
if [ "$lines" -gt 300 ]; then
  echo "check-docs: README.md has $lines lines (at most 300)"
  bad=1
fi

# relative links: [text](target) and ![alt](target), without http(s):, mailto: and in-page #anchors
for f in README.md docs/*.md; do
  dir=$(dirname "$f")
  while IFS=: read -r n link; do
    target=${link#*](}; target=${target%)}; target=${target%%#*}
    case "$target" in ''|http://*|https://*|mailto:*) continue ;; esac
    if [ ! -e "$dir/$target" ]; then
      echo "check-docs: $f:$n: link to $target: no such file"
      bad=1
    fi
  done < <(grep -noE '!?\[[^]]*\]\([^) ]+\)' "$f")
done

[ "$bad" -eq 0 ] && echo "check-docs: ok (README.md $lines lines)"
exit "$bad"
