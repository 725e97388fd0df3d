"""The README is a map: every relative link of it and of the pages it leads to resolves, anchors included."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*/README.md")),
         ROOT / "benchmarks" / "RESULTS.md"]
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a markdown page's headings."""
    text = _FENCE.sub("", page.read_text())
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` whose file or anchor does not exist."""
    broken = []
    for target in _LINK.findall(_FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
            broken.append(f"{target} (no heading with anchor #{anchor})")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page):
    assert broken_links(page) == []


def test_the_readme_starts_with_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines[0] == "```bash"
    assert lines[1].startswith("./dev demo   # ") and lines[2].startswith("./dev test   # ")
    assert lines[3] == "```"


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "a.md").write_text("# Title\n\n## Some `code`: here\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#some-code-here) [bad](a.md#nothing) [gone](c.md) [self](#x)\n\n# X\n")
    assert broken_links(page) == ["a.md#nothing (no heading with anchor #nothing)", "c.md (no such file)"]
