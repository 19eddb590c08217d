"""The repository documents itself: the README is a front door that fits on
a few screens, every link between its documents leads somewhere, and the
configuration has one home -- the man page roombox.conf(5) -- which names
exactly the keys the parser knows (common/config.c's table), as does the
packaged conf/roombox.conf.  No stack is needed here."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def parser_keys():
    text = (REPO / "common" / "config.c").read_text()
    keys = re.findall(r'^\s*\{\s*"([a-z_]+)",\s*V_[A-Z_]+,\s*FIELD\(', text, re.M)
    assert len(keys) > 30, "the parser's key table was not found in common/config.c"
    return set(keys)


def anchor(heading):
    """GitHub's anchor for a Markdown heading."""
    t = heading.strip().lower()
    t = re.sub(r"[^\w\- ]", "", t)
    return t.replace(" ", "-")


def anchors(path):
    text = re.sub(r"(?ms)^```.*?^```", "", path.read_text())
    return {anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def test_the_readme_is_a_front_door():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    text = "\n".join(lines)
    for must in ("make run", "make check", "docs/api.md", "roombox.conf"):
        assert must in text, must


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_link_between_documents_leads_somewhere(doc):
    text = re.sub(r"(?ms)^```.*?^```", "", doc.read_text())
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue                    # http:, mailto: -- not ours to check
        path, _, frag = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            broken.append(f"{target}: no such heading in {dest.name}")
    assert not broken, broken


def test_the_man_page_names_every_key_the_parser_knows():
    man = (REPO / "man" / "roombox.conf.5").read_text()
    documented = set(re.findall(r"^\.TP\n\.BR? ([a-z_]+)\b", man, re.M))
    keys = parser_keys()
    assert documented == keys, (f"in the parser, not in roombox.conf(5): {sorted(keys - documented)}; "
                                f"in roombox.conf(5), not in the parser: {sorted(documented - keys)}")


def test_the_packaged_configuration_shows_every_key():
    conf = (REPO / "conf" / "roombox.conf").read_text()
    shown = set(re.findall(r"^#? ?([a-z_]+) *=", conf, re.M))
    keys = parser_keys()
    assert keys <= shown, f"keys conf/roombox.conf does not show: {sorted(keys - shown)}"
    assert shown <= keys, f"conf/roombox.conf shows keys the parser refuses: {sorted(shown - keys)}"


def test_nothing_cites_a_document_outside_the_repository():
    """Comments and documents say what they mean in their own words: no
    section numbers of a specification, no "seed" document, that a reader
    of this repository does not have."""
    import subprocess
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    cited = []
    for name in files:
        path = REPO / name
        if name.startswith("tests/fuzz/corpus/") or name.startswith("tests/fuzz/regress/") \
                or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if re.search(r"\bSPEC\b|\bthe seed\b|\bseed's\b", line) and "AF_UNSPEC" not in line:
                cited.append(f"{name}:{n}: {line.strip()[:80]}")
    assert not cited, cited
