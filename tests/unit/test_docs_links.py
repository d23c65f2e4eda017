"""The documentation's links hold: every relative link between the repository's markdown
pages (README.md, docs/, helm/README.md, ...) reaches a file, every ``#anchor`` a heading
or an ``<a id>`` of that page, every repository path a page names exists, and nothing
points outside the repository. The code's
citations of the pages (``docs/domain.md#shrink-rule`` in a docstring) are held to the
same."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from state.shrink_rule import SHRINK_DEADLINE_FORMULA

REPO = Path(__file__).resolve().parents[2]
CODE_DIRS = ("state", "streaming", "dashboards", "bench", "conf", "helm", "tests")
CODE_SUFFIXES = {".py", ".json", ".yaml", ".yml", ".toml"}

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)
_HTML_LINK = re.compile(r"""<a\s[^>]*href=["']([^"']+)["']""", re.I)
_HTML_ANCHOR = re.compile(r"""<a\s[^>]*(?:id|name)=["']([^"']+)["']""", re.I)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_PARENT_PATH = re.compile(r"(?<![\w./-])((?:\.\./)+[\w./-]*)")
_CITATION = re.compile(r"(?<![\w/.-])(docs/[\w-]+\.md)(#[\w-]+)?")
_REPO_PATH = re.compile(r"`((?:state|streaming|dashboards|bench|conf|helm|tests|docs)/[\w./-]*)`")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto:, ...


@dataclass(frozen=True)
class Problem:
    where: str
    link: str
    why: str

    def __str__(self) -> str:
        return f"{self.where}: {self.link}: {self.why}"


def markdown_files(root: Path) -> list[Path]:
    """Every markdown file of the repository, outside hidden and generated directories."""
    return sorted(
        path
        for path in root.rglob("*.md")
        if not any(
            part.startswith(".") or part == "__pycache__" for part in path.relative_to(root).parts
        )
    )


def _prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """Lines outside fenced code blocks, with inline code removed."""
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, _INLINE_CODE.sub("", line)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors a markdown page defines: its headings' (numbered when repeated, as GitHub
    does) and its explicit ``<a id>`` / ``<a name>``."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    text = page.read_text(encoding="utf-8")
    for _, line in _prose_lines(text):
        found.update(_HTML_ANCHOR.findall(line))
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def _inside(root: Path, path: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def check_target(root: Path, page: Path, where: str, link: str) -> Problem | None:
    """What is wrong with ``link`` found on ``page`` (None when it holds)."""
    if _EXTERNAL.match(link):
        return None
    target, _, anchor = link.partition("#")
    path = page if not target else (page.parent / target)
    if target.startswith("/"):
        return Problem(where, link, "an absolute path: use a path relative to the page")
    if not _inside(root, path):
        return Problem(where, link, "points outside the repository")
    if not path.exists():
        return Problem(where, link, "no such file")
    if anchor:
        if path.is_dir() or path.suffix != ".md":
            return Problem(where, link, "an anchor into a file that is not markdown")
        if anchor not in anchors(path):
            return Problem(where, link, f"no anchor #{anchor} in {path.relative_to(root)}")
    return None


def markdown_problems(root: Path) -> list[Problem]:
    problems: list[Problem] = []
    for page in markdown_files(root):
        name = page.relative_to(root).as_posix()
        text = page.read_text(encoding="utf-8")
        for number, line in _prose_lines(text):
            where = f"{name}:{number}"
            links = [*_LINK.findall(line), *_HTML_LINK.findall(line), *_REFERENCE.findall(line)]
            for link in links:
                if (problem := check_target(root, page, where, link)) is not None:
                    problems.append(problem)
        # a path out of the repository, anywhere in the page (code blocks included)
        for number, line in enumerate(text.splitlines(), start=1):
            unlinked = _REFERENCE.sub("", _HTML_LINK.sub("", _LINK.sub("", line)))
            for path in _PARENT_PATH.findall(unlinked):
                where = f"{name}:{number}"
                if not _inside(root, page.parent / path):
                    problems.append(Problem(where, path, "points outside the repository"))
                elif not (page.parent / path).exists():
                    problems.append(Problem(where, path, "no such path in the repository"))
    return problems


def path_problems(root: Path) -> list[Problem]:
    """Repository paths a page names in code spans (``state/shrink_rule.py``), from the root:
    each must exist, so that a module moved without its documentation fails here."""
    problems: list[Problem] = []
    for page in markdown_files(root):
        name = page.relative_to(root).as_posix()
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for path in _REPO_PATH.findall(line):
                if "*" not in path and not (root / path).exists():
                    problems.append(Problem(f"{name}:{number}", path, "no such path"))
    return problems


def citation_problems(root: Path) -> list[Problem]:
    """``docs/page.md#anchor`` cited in code, configuration and tests."""
    problems: list[Problem] = []
    for directory in CODE_DIRS:
        for path in sorted((root / directory).rglob("*")):
            if path.suffix not in CODE_SUFFIXES or not path.is_file():
                continue
            if any(part.startswith(".") or part == "__pycache__" for part in path.parts):
                continue
            if path.resolve() == Path(__file__).resolve():  # its own examples
                continue
            name = path.relative_to(root).as_posix()
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for page, anchor in _CITATION.findall(line):
                    problem = check_target(
                        root, root / "README.md", f"{name}:{number}", page + anchor
                    )
                    if problem is not None:
                        problems.append(problem)
    return problems


def test_the_repository_has_its_pages() -> None:
    pages = {p.relative_to(REPO).as_posix() for p in markdown_files(REPO)}
    assert {"README.md", "docs/domain.md", "docs/event-contract.md", "helm/README.md"} <= pages


def test_no_dead_link_between_the_pages() -> None:
    problems = markdown_problems(REPO)
    assert not problems, "\n".join(map(str, problems))


def test_the_pages_name_paths_that_exist() -> None:
    problems = path_problems(REPO)
    assert not problems, "\n".join(map(str, problems))


def test_the_code_cites_pages_and_anchors_that_exist() -> None:
    problems = citation_problems(REPO)
    assert not problems, "\n".join(map(str, problems))


def test_the_domain_page_states_the_shrink_deadline_as_the_rule_defines_it() -> None:
    assert f"    {SHRINK_DEADLINE_FORMULA}\n" in (REPO / "docs" / "domain.md").read_text()


def test_the_readme_stays_short() -> None:
    assert len((REPO / "README.md").read_bytes()) < 8 * 1024


# ------------------------------------------------------------ the checker catches them


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "rules.md").write_text(
        '# Rules\n\n## The shrink rule\n\n<a id="caught-up"></a>\ntext\n\n## Notes\n\n## Notes\n'
    )
    (root / "README.md").write_text("[rules](docs/rules.md#the-shrink-rule)\n")
    (tmp_path / "outside.md").write_text("# Outside\n")
    return root


def test_a_sound_tree_has_no_problem(repo: Path) -> None:
    page = repo / "docs" / "rules.md"
    assert anchors(page) == {"rules", "the-shrink-rule", "caught-up", "notes", "notes-1"}
    assert markdown_problems(repo) == []


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("[gone](docs/missing.md)", "no such file"),
        ("[gone](docs/rules.md#missing)", "no anchor #missing"),
        ("[here](#nowhere)", "no anchor #nowhere"),
        ("[out](../outside.md)", "points outside the repository"),
        ("[abs](/etc/hosts)", "an absolute path"),
        ("the rules are in ../shared/design/rules.md", "points outside the repository"),
        ("see ../repo/docs/missing.md", "no such path in the repository"),
        ("```\ncat ../shared/notes.md\n```", "points outside the repository"),
        ("[ref]: docs/missing.md", "no such file"),
        ('<a href="docs/rules.md#missing">x</a>', "no anchor #missing"),
    ],
)
def test_the_checker_finds(repo: Path, line: str, why: str) -> None:
    (repo / "README.md").write_text(f"# Readme\n\n{line}\n")
    problems = markdown_problems(repo)
    assert len(problems) == 1, problems
    assert why in problems[0].why


def test_links_in_code_are_not_links(repo: Path) -> None:
    (repo / "README.md").write_text("`[x](docs/missing.md)`\n\n```\n[y](docs/missing.md)\n```\n")
    assert markdown_problems(repo) == []


def test_a_citation_in_code_of_a_missing_anchor_is_found(repo: Path) -> None:
    (repo / "state").mkdir()
    (repo / "state" / "rule.py").write_text(
        '"""See docs/rules.md#caught-up and docs/rules.md#gone."""\n'
    )
    problems = citation_problems(repo)
    assert [p.link for p in problems] == ["docs/rules.md#gone"]


def test_a_path_named_in_a_page_that_does_not_exist_is_found(repo: Path) -> None:
    (repo / "state").mkdir()
    (repo / "state" / "rule.py").write_text("")
    (repo / "README.md").write_text("`state/rule.py` and `state/gone.py`, `state/*.py`\n")
    assert [p.link for p in path_problems(repo)] == ["state/gone.py"]
