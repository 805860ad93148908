"""The docs stand on their own: no doc cites a path outside the repository or an issue number, every link
reaches a file and heading of the repository, the README stays short, and every dated measurement lives in
docs/benchmarks.md (its table links each script to its figures' section), the area docs linking there."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# an absolute path on the machine a doc was written on (a bench's own device paths, /dev/..., /usr/... of a
# board or a guest, are documentation of those machines, not citations)
OUTSIDE = re.compile(r"(?<![\w.~/-])/(?:work|home|root|tmp/[\w-]*hil|mnt|Users|srv)/[\w./-]+")
LINK = re.compile(r"\[[^\]]+\]\(([^)#\s]+)(?:#([^)\s]+))?\)")
BENCHMARKS = REPO / "docs" / "benchmarks.md"
# a measurement's date (2026-12-07, 7 Dec 2026) and a figure (a number with its unit, a host's load, "measured")
DATE = re.compile(
    r"\b20\d\d-[01]\d-[0-3]\d\b|\b[0-3]?\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* 20\d\d\b"
)
FIGURE = re.compile(r"\d[\d,.]*\s?(%|ms|us|µs|s|min|MiB|MB|KB|KiB|GB|mJ|J|W|mW|FPS|x)\b|\bload\b|\bmeasured\b", re.I)
CODE = re.compile(r"`[^`]*`")  # example output and version strings carry dates that are not measurements


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


def headings(page: Path) -> set[str]:
    """The anchors of a markdown page's headings."""
    return {slug(h.lstrip("#")) for h in page.read_text(encoding="utf-8").splitlines() if h.startswith("#")}


def dated_measurements(text: str) -> list[int]:
    """First lines of the paragraphs and table rows of a markdown `text` that give a dated figure."""
    found, para, start = [], [], 0
    for number, line in enumerate([*text.splitlines(), ""], 1):
        if line.strip() and not line.startswith(("#", "|")):
            start = start if para else number
            para.append(line)
            continue
        for first, block in ((start, " ".join(para)), (number, line if line.startswith("|") else "")):
            plain = CODE.sub("", block)
            if DATE.search(plain) and FIGURE.search(plain):
                found.append(first)
        para = []
    return found


def test_a_dated_figure_is_found_and_a_dated_fact_is_not():
    text = "Intro.\n\nMeasured on 2026-12-02,\nload 3: 9.6 ms.\n\n| 2 Dec 2026 | 4.1 s |\n\nA `v1 on 2026-01-01` 9 ms."
    assert dated_measurements(text) == [3, 6]
    assert dated_measurements("Runs stored before 2026-12-02 have the rule written out.\n") == []


def test_no_dated_measurement_outside_the_benchmarks_page():
    found = {str(p.relative_to(REPO)): lines for p in DOCS
             if p != BENCHMARKS and (lines := dated_measurements(p.read_text(encoding="utf-8")))}  # fmt: skip
    assert not found, f"dated figures belong in docs/benchmarks.md, the area doc links there: {found}"
    assert len(dated_measurements(BENCHMARKS.read_text(encoding="utf-8"))) > 40, "the test sees the figures"


def test_benchmarks_table_links_to_each_scripts_figures():
    rows = [line for line in BENCHMARKS.read_text(encoding="utf-8").splitlines() if line.startswith("| `tests/")]
    assert len(rows) >= 10
    for row in rows:
        home = row.rstrip(" |").rsplit(" | ", 1)[1]
        links = LINK.findall(home)
        assert links, f"no link to the figures: {row}"
        assert not re.search(r"\d", LINK.sub("", home)), f"the table repeats a figure instead of linking: {row}"
    scripts = {p.name for p in (REPO / "tests" / "bench").glob("bench_*.py")}
    assert scripts <= set(re.findall(r"bench_\w+\.py", "\n".join(rows))), "a benchmark script has no row"


def test_every_link_reaches_a_file_and_heading():
    broken = []
    for doc in DOCS:
        for target, anchor in LINK.findall(doc.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            page = (doc.parent / target).resolve()
            if not page.exists():
                broken.append(f"{doc.relative_to(REPO)}: {target} does not exist")
            elif anchor and page.suffix == ".md" and anchor not in headings(page):
                broken.append(f"{doc.relative_to(REPO)}: {target} has no section #{anchor}")
    assert not broken, "\n".join(broken)


def test_the_readme_is_short_and_docs_name_no_issue_numbers():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    for section in ("## Quick start", "## What the nightly does", "## Commands", "## Exit codes",
                    "## Write a device test", "## Read more"):  # fmt: skip
        assert section in readme
    cited = {str(p.relative_to(REPO)): m for p in DOCS if (m := re.findall(r"\bissues?[ -]#?\d+", p.read_text()))}
    assert not cited, f"docs name issues (say what the code does; history goes in commit messages): {cited}"


def test_the_fleet_page_example_is_a_valid_fleet(tmp_path: Path):
    from bench.config.fleet import load_fleet

    page = (REPO / "docs" / "fleet.md").read_text(encoding="utf-8")
    example = page.split("## A first lab", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "desk.toml").write_text(example)
    fleet = load_fleet(tmp_path / "desk.toml")
    assert [(d.name, d.kind) for d in fleet] == [("c6-desk", "esp32c6"), ("pi5-desk", "pi5")]
    assert fleet.get("c6-desk").power is not None
