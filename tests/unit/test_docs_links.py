"""The docs stand on their own: no doc cites a path outside the repository, and the README's Measured table
points at each figure's one home (a doc page's section) instead of repeating numbers."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# an absolute path on the machine a doc was written on (a bench's own device paths, /dev/..., /usr/... of a
# board or a guest, are documentation of those machines, not citations)
OUTSIDE = re.compile(r"(?<![\w.~/-])/(?:work|home|root|tmp/[\w-]*hil|mnt|Users|srv)/[\w./-]+")
LINK = re.compile(r"\[[^\]]+\]\(([^)#\s]+)(?:#([^)\s]+))?\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def outside_paths(text: str) -> list[str]:
    return OUTSIDE.findall(text)


def test_the_pattern_catches_a_machine_path():
    assert outside_paths("noise figures in (`/work/shared/docs/verdict-noise-facts.md`)") == [
        "/work/shared/docs/verdict-noise-facts.md"
    ]
    assert outside_paths('storage = "/dev/disk/by-id/x"; workdir = "/opt/nvidia/L4T"; ~/work/x') == []


def test_no_doc_cites_a_path_outside_the_repository():
    found = {str(p.relative_to(REPO)): hits for p in DOCS if (hits := outside_paths(p.read_text(encoding="utf-8")))}
    assert not found, f"docs cite paths outside the repository (copy what they need in): {found}"


def test_readme_measured_table_links_to_each_figure_home():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Measured", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `tests/bench/")]
    assert len(rows) >= 10
    for row in rows:
        home = row.rstrip(" |").rsplit(" | ", 1)[1]
        links = LINK.findall(home)
        assert links, f"no link to the figures' doc page: {row}"
        assert not re.search(r"\d", LINK.sub("", home)), f"the README repeats a figure instead of linking: {row}"
        for target, anchor in links:
            page = REPO / target
            assert page.is_file(), f"{target} does not exist"
            headings = {slug(h.lstrip("#")) for h in page.read_text(encoding="utf-8").splitlines() if h.startswith("#")}
            assert anchor in headings, f"{target} has no section #{anchor}"
    scripts = {p.name for p in (REPO / "tests" / "bench").glob("bench_*.py")}
    assert scripts <= set(re.findall(r"bench_\w+\.py", section)), "a benchmark script has no row"
