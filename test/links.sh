#!/bin/bash
# Link check of the documentation: every relative link and every anchor in
# README.md, CHANGELOG.md, docs/*.md and test/bench/README.md.
#   - the target file (or folder) exists, relative to the linking file;
#   - an anchor (file.md#anchor, #anchor) is a heading of the target, by
#     GitHub's rules: the heading's text (without its markup) in lower case,
#     punctuation but - and _ removed, spaces turned to -, and a heading
#     whose slug came before gets -1, -2, ...; an HTML id or name counts too.
# http(s):// and mailto: links are not checked, nor links in code blocks
# and inline code.  Exits with status 1 listing every broken link.
#
# The self-test (run first) checks that the checker fails: in a temporary
# tree with good links, one missing file and one missing anchor, it must
# report exactly those two.
#
# Usage: test/links.sh [--self-test] [ROOT]   (test/run.sh runs it first)
#   --self-test  run the self-test only
#   ROOT         the tree to check (default: this repository)
# Needs python3 (installed by test/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# check ROOT: the link check of the tree ROOT; prints each broken link as
# FILE:LINE: TARGET: WHY
check() {
    python3 - "$1" <<'EOF'
import os, re, sys, glob, urllib.parse

root = sys.argv[1]
files = [f for f in ["README.md", "CHANGELOG.md"] if os.path.isfile(os.path.join(root, f))]
files += sorted(os.path.relpath(f, root) for f in glob.glob(os.path.join(root, "docs", "*.md")))
if os.path.isfile(os.path.join(root, "test", "bench", "README.md")):
    files.append("test/bench/README.md")

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")

def blank_code_blocks(text):
    """The text with the lines of fenced code blocks emptied (line numbers kept)."""
    out, fence = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            out.append("")
        elif fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and line.strip() == m.group(1):
                fence = None
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)

CODE_SPAN = re.compile(r"(`+)(?!`)[\s\S]*?(?<!`)\1(?!`)")

def blank_code_spans(text):
    """Inline code replaced by spaces (newlines kept, for line numbers)."""
    return CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)

def slug(heading):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)                       # HTML tags
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")

anchor_cache = {}

def anchors(path):
    if path not in anchor_cache:
        with open(path, encoding="utf-8") as f:
            text = blank_code_blocks(f.read())
        seen, found = {}, set()
        for line in text.split("\n"):
            m = re.match(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(2))
                if s in seen:
                    seen[s] += 1
                    found.add(f"{s}-{seen[s]}")
                else:
                    seen[s] = 0
                    found.add(s)
            for m in re.finditer(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"", line):
                found.add(m.group(1))
        anchor_cache[path] = found
    return anchor_cache[path]

LINK = re.compile(r"\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)

broken = 0
for name in files:
    path = os.path.join(root, name)
    with open(path, encoding="utf-8") as f:
        text = blank_code_spans(blank_code_blocks(f.read()))
    targets = [(m.start(), m.group(1)) for m in LINK.finditer(text)]
    targets += [(m.start(), m.group(1)) for m in REF.finditer(text)]
    for pos, target in sorted(targets):
        line = text.count("\n", 0, pos) + 1
        if re.match(r"^(https?:|mailto:)", target, re.I) or target == "":
            continue
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            print(f"{name}:{line}: {target}: not a relative link")
            broken += 1
            continue
        file_part, _, anchor = target.partition("#")
        file_part = urllib.parse.unquote(file_part)
        dest = path if file_part == "" else os.path.normpath(os.path.join(os.path.dirname(path), file_part))
        if not os.path.exists(dest):
            print(f"{name}:{line}: {target}: no such file")
            broken += 1
            continue
        if anchor and dest.endswith(".md") and os.path.isfile(dest):
            if urllib.parse.unquote(anchor) not in anchors(dest):
                print(f"{name}:{line}: {target}: no heading #{anchor} in {os.path.relpath(dest, root)}")
                broken += 1
print(f"links: {len(files)} files checked, {broken} broken", file=sys.stderr)
sys.exit(1 if broken else 0)
EOF
}

self_test() {
    local tmp out expected
    tmp=$(mktemp -d)
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" RETURN
    mkdir -p "$tmp/docs" "$tmp/test/bench"
    cat >"$tmp/README.md" <<'EOF'
# Top

## A heading: with `code`, punctuation & more
## Twice
## Twice

Good: [a](docs/a.md), [b](docs/a.md#its-heading), [c](#top),
[d](#a-heading-with-code-punctuation--more), [e](#twice-1), [f](test/bench/README.md#bench),
[g](https://example.com/missing.md), [h](mailto:x@example.com), [i][ref].
Broken: [j](docs/missing.md), [k](docs/a.md#no-such-heading).
Not links: `[l](docs/code-span.md)`, and

```md
[m](docs/code-block.md)
# not a heading
```

[ref]: docs/a.md#its-heading
EOF
    printf '# A\n\n## Its heading\n\nBack to [the top](../README.md#top).\n' >"$tmp/docs/a.md"
    printf '# Bench\n' >"$tmp/test/bench/README.md"
    printf '# Changelog\n\n[twice](README.md#twice)\n' >"$tmp/CHANGELOG.md"
    expected='README.md:10: docs/missing.md: no such file
README.md:10: docs/a.md#no-such-heading: no heading #no-such-heading in docs/a.md'
    if out=$(check "$tmp" 2>/dev/null); then
        echo "links: self-test FAILED: broken links were not reported" >&2
        return 1
    fi
    if [ "$out" != "$expected" ]; then
        printf 'links: self-test FAILED: expected\n%s\ngot\n%s\n' "$expected" "$out" >&2
        return 1
    fi
    echo "links: self-test passed (the two broken links reported, nothing else)"
}

root=$PWD
case ${1:-} in
    --self-test) self_test; exit ;;
    "") ;;
    *) root=$1 ;;
esac
self_test
if ! check "$root"; then
    echo "links: FAIL: broken links (above)" >&2
    exit 1
fi
echo "links: every relative link and anchor resolves"
