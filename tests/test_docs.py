"""The documentation site builds with ``mkdocs build --strict``, as ``make docs`` builds it.

Strict mode fails on a broken link, a link to a missing anchor, a page left out of the nav and a
docstring the API reference cannot read, so a change that breaks the site fails the suite, not
only a later ``make docs``. Its code blocks are run by ``tests/test_readme.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_strictly(tmp_path):
    """mkdocs builds every page and the API reference without a warning."""
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install '.[docs]'")
    # The theme's notice about its own future is not a problem of these pages; it would only clutter a failure.
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-2000:]}\n{done.stderr[-6000:]}"
    built = tmp_path / "site"
    for page in ("index.html", "api/index.html", "quality/index.html", "security-limits/index.html"):
        assert (built / page).is_file(), page
    # The reference is generated, not left empty: a tool's entry is there under its own anchor.
    assert 'id="decirank.arank"' in (built / "api" / "index.html").read_text()


def test_the_readme_links_to_pages_that_exist():
    """The README is read on its own (a repository's front page), outside the site: its relative links must hold."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", readme)
    relative = [target.split("#")[0] for target in targets if not re.match(r"[a-z]+:", target)]
    assert relative, "the README links to no documentation page"
    missing = [target for target in relative if target and not (ROOT / target).exists()]
    assert missing == []
