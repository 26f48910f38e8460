"""Every dlbridge name the guides present as public is in dlbridge.__all__
and exists; every name of __all__ exists."""

import glob
import os
import re

import pytest

import dlbridge

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PACKAGE = os.path.join(ROOT, "python", "dlbridge")
# `dlbridge.NAME` in inline code or code, and `from dlbridge import A, B`.
DOTTED = re.compile(r"(?<![\w./-])dlbridge\.([A-Za-z][A-Za-z0-9_]*)\b(?!/)")  # not a path (dlbridge.dev/...)
FILE_SUFFIXES = {"h", "hpp", "map", "md", "py", "pyi", "so", "pc", "rs", "txt", "toml"}  # dlbridge.h is a file
FROM_IMPORT = re.compile(r"^\s*from dlbridge import ([A-Za-z0-9_, ]+)$", re.M)


def foreign_pages():
    """The guides and references of other languages, where `dlbridge.X` is
    that language's API: the site's configuration names them by document
    name, their path under docs/ without .md (docs/conf.py)."""
    with open(os.path.join(ROOT, "docs", "conf.py"), encoding="utf-8") as f:
        m = re.search(r"^dlbridge_foreign_pages = \[([^\]]*)\]", f.read(), re.M)
    return set(re.findall(r'"([^"]+)"', m.group(1)))


def guide_names():
    pages = [os.path.join(ROOT, "README.md")] + glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
    foreign = foreign_pages()
    pages = [p for p in pages if os.sep + "conformance" + os.sep not in p and not p.endswith("CHANGELOG.md")
             and os.path.relpath(p, os.path.join(ROOT, "docs"))[:-3] not in foreign]
    names = {}
    for page in pages:
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for m in DOTTED.finditer(text):
            if m.group(1) not in FILE_SUFFIXES:
                names.setdefault(m.group(1), os.path.relpath(page, ROOT))
        for m in FROM_IMPORT.finditer(text):
            for name in m.group(1).split(","):
                names.setdefault(name.strip(), os.path.relpath(page, ROOT))
    return names


def submodules():
    """The package's public submodules (dlbridge.testing, dlbridge.check)."""
    found = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(PACKAGE, "*.py"))}
    found |= {os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(PACKAGE, "*", "__init__.py"))}
    return {n for n in found if not n.startswith("_")}


def test_every_name_of_all_exists():
    for name in dlbridge.__all__:
        assert hasattr(dlbridge, name), name


def test_the_sharing_calls_and_the_checker_are_public():
    assert {"share", "share_send", "share_recv", "shared_mappings", "check"} <= set(dlbridge.__all__)


def test_every_name_the_guides_present_is_public():
    if not os.path.isdir(os.path.join(ROOT, "docs")):
        pytest.skip("the guides are not next to the tests")
    names = guide_names()
    assert "from_dlpack" in names  # the scan sees the guides
    modules = submodules()
    for name, page in sorted(names.items()):
        if name in modules and name not in dlbridge.__all__:
            continue  # a submodule (dlbridge.testing): imported by its own name
        assert name in dlbridge.__all__, "%s names dlbridge.%s, which is not in dlbridge.__all__" % (page, name)
        assert hasattr(dlbridge, name), "%s names dlbridge.%s, which does not exist" % (page, name)
