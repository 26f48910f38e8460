"""The site's own Sphinx extension (docs/conf.py loads it).

* Markers in a page's source that this extension replaces as the page is read:
  ``<!-- site-include: PATH -->``  the text of PATH (relative to docs/), its
                                   links rewritten to stay right from here;
  ``<!-- site-toctrees -->``       the index's tables of contents, built from
                                   the pages found (SECTIONS below): a new page
                                   joins the site with no change here;
  ``<!-- site-c-headers -->``      one section per Doxygen group of the
                                   headers of include/dlbridge (breathe).
* Links to files outside docs/ that the site shows as pages (README.md,
  bench/README.md, CHANGELOG.md) are pointed at those pages, in every page.
* Inline code that is a C name (``dlb_*``, ``DLB_*``) or a public Python name
  (``dlbridge.*``) becomes a link into the reference; one that names nothing
  there is a broken reference, which fails the build (-W, nitpicky).
* ``rustdoc:PATH`` links go to the Rust reference copied to html/rust/.
* The Python reference's signatures carry the types of python/dlbridge/_glue.pyi
  for the extension's functions, which Python cannot introspect.
"""

import ast
import glob
import os
import posixpath
import re

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms import SphinxTransform

DOCS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(DOCS)

# Files outside docs/ that are pages of the site, by repository path.
PAGES_OUTSIDE = {"README.md": "index", "bench/README.md": "benchmarks", "CHANGELOG.md": "changelog"}

# The index's sections: (caption, pages in this order). A page of docs/ named
# in no section joins "Guides" (its name order); pages under a folder named
# with "/*" join that section in name order.
SECTIONS = [
    ("Start here", ["why", "building", "concepts"]),
    ("Languages", ["c", "cpp", "python", "rust", "go", "java", "javascript"]),
    ("Guides", None),
    ("Reference", ["reference/c-api", "reference/python-api", "reference/rust-api", "reference/*",
                   "troubleshooting", "conformance", "interop"]),
    ("Project", ["benchmarks", "RELIABILITY", "changelog"]),
    ("Maintainers", ["maintainers/*", "layout"]),
]
# Pages shown under another page (in a hidden table of contents of that page)
# rather than in the index.
CHILDREN = {"conformance": ["conformance/*"]}

LINK = re.compile(r"(\]\(|^\[[^\]]+\]:\s+)([^)\s]+)", re.M)


def _rewrite_links(text, origin_dir, docname):
    """Relative links of a text written in origin_dir (repository-relative),
    made relative to the page docname (under docs/)."""
    page_dir = posixpath.dirname(posixpath.join("docs", docname))

    def fix(m):
        target = m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return m.group(0)
        path, _, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(origin_dir, path))
        if repo_path in PAGES_OUTSIDE:
            repo_path = posixpath.join("docs", PAGES_OUTSIDE[repo_path] + ".md")
        new = posixpath.relpath(repo_path, page_dir) + ("#" + anchor if anchor else "")
        return m.group(1) + new

    return LINK.sub(fix, text)


def _include(m, docname):
    rel = m.group(1).strip()
    path = os.path.normpath(os.path.join(DOCS, rel))
    with open(path, encoding="utf-8") as f:
        text = f.read()
    origin = posixpath.dirname(os.path.relpath(path, ROOT).replace(os.sep, "/"))
    return _rewrite_links(text, origin, docname)


def _toctrees(env):
    found = set(env.found_docs)
    placed = {"index"}
    blocks = []

    def expand(pattern):
        if pattern.endswith("/*"):
            prefix = pattern[:-1]
            return sorted(d for d in found if d.startswith(prefix) and "/" not in d[len(prefix):])
        return [pattern] if pattern in found else []

    for children in CHILDREN.values():
        for pattern in children:
            placed.update(expand(pattern))
    for _, pages in SECTIONS:
        for p in pages or []:
            placed.update(expand(p))
    for caption, pages in SECTIONS:
        if pages is None:
            names = sorted((d for d in found if "/" not in d and d not in placed), key=str.lower)
        else:
            names = [n for p in pages for n in expand(p)]
        names = list(dict.fromkeys(names))
        if names:
            blocks.append("```{toctree}\n:caption: %s\n:maxdepth: 1\n\n%s\n```\n" % (caption, "\n".join(names)))
    return "\n".join(blocks)


def _children(env, docname):
    found = set(env.found_docs)
    names = []
    for pattern in CHILDREN.get(docname, []):
        prefix = pattern[:-1]
        names += sorted(d for d in found if d.startswith(prefix) and "/" not in d[len(prefix):])
    if not names:
        return ""
    return "\n\n```{toctree}\n:hidden:\n\n%s\n```\n" % "\n".join(names)


def _c_groups(xml_dir):
    """One section per Doxygen group (the headers' `\\defgroup`s), in the order
    of the headers (common.h first, the rest by name) and of their lines."""
    import xml.etree.ElementTree as ET

    headers = sorted(os.path.basename(h) for h in glob.glob(os.path.join(ROOT, "include", "dlbridge", "*.h")))
    order = {h: i for i, h in enumerate(sorted(headers, key=lambda h: (h != "common.h", h)))}
    groups = []
    for path in glob.glob(os.path.join(xml_dir, "group__*.xml")):
        comp = ET.parse(path).getroot().find("compounddef")
        name = comp.findtext("compoundname")
        title = comp.findtext("title") or name
        where = []
        for loc in comp.iter("location"):
            f = os.path.basename(loc.get("file", ""))
            if f in order:
                where.append((order[f], int(loc.get("line", "0"))))
        groups.append((min(where) if where else (len(order), 0), name, title))
    out = []
    for _, name, title in sorted(groups):
        out.append("## %s\n\n```{doxygengroup} %s\n:project: dlbridge\n:content-only:\n```\n" % (title, name))
    return "\n".join(out)


def on_source_read(app, docname, source):
    text = source[0]
    text = re.sub(r"<!-- site-include: (.*?) -->", lambda m: _include(m, docname), text)
    if "<!-- site-toctrees -->" in text:
        text = text.replace("<!-- site-toctrees -->", _toctrees(app.env))
    if "<!-- site-c-headers -->" in text:
        text = text.replace("<!-- site-c-headers -->", _c_groups(app.config.breathe_projects["dlbridge"]))
    text += _children(app.env, docname)
    # Links from pages of docs/ to the pages that live outside it.
    text = _rewrite_links(text, posixpath.dirname(posixpath.join("docs", docname)), docname)
    source[0] = text


C_NAME = re.compile(r"^((?:dlb|DLB)_[A-Za-z0-9_]*[A-Za-z0-9])(\(\))?$")
PY_NAME = re.compile(r"^(dlbridge(?:\.[A-Za-z][A-Za-z0-9_]*)+)(\(\))?$")
FILE_NAME = re.compile(r"\.(h|hpp|c|cpp|map|md|py|pyi|so|pc|rs|txt|toml)$")


class LinkNames(SphinxTransform):
    """Inline code naming a C or Python API name becomes a reference to it."""

    default_priority = 5  # before myst's and Sphinx's reference resolution

    def apply(self):
        ignore = set(self.config.dlbridge_unlinked_names)
        if self.env.docname in self.config.dlbridge_unlinked_pages:
            return
        for node in list(self.document.findall(nodes.literal)):
            if isinstance(node.parent, (nodes.reference, addnodes.pending_xref, nodes.literal_block)):
                continue
            text = node.astext()
            m = C_NAME.match(text)
            domain, reftype = "c", "identifier"
            if not m:
                foreign = self.env.docname in self.config.dlbridge_foreign_pages
                m = None if foreign or FILE_NAME.search(text) else PY_NAME.match(text)
                domain, reftype = "py", "obj"
            if not m or m.group(1) in ignore:
                continue
            xref = addnodes.pending_xref("", node.deepcopy(), refdomain=domain, reftype=reftype,
                                         reftarget=m.group(1), refexplicit=True, refwarn=True,
                                         refdoc=self.env.docname)
            node.replace_self(xref)


def on_doctree_resolved(app, doctree, docname):
    up = "../" * docname.count("/")
    for ref in doctree.findall(nodes.reference):
        uri = ref.get("refuri", "")
        if uri.startswith("rustdoc:"):
            ref["refuri"] = up + "rust/" + uri[len("rustdoc:"):]


_STUB = None


def _stub():
    """name -> (args, return annotation) of python/dlbridge/_glue.pyi, and
    "Tensor.name" for the Tensor class's members."""
    global _STUB
    if _STUB is None:
        _STUB = {}
        path = os.path.join(ROOT, "python", "dlbridge", "_glue.pyi")
        tree = ast.parse(open(path, encoding="utf-8").read())

        def add(prefix, body):
            for node in body:
                if isinstance(node, ast.FunctionDef):
                    args = node.args
                    if prefix and args.posonlyargs[:1] and args.posonlyargs[0].arg == "self":
                        args.posonlyargs = args.posonlyargs[1:]
                    elif prefix and args.args[:1] and args.args[0].arg == "self":
                        args.args = args.args[1:]
                    ret = ast.unparse(node.returns) if node.returns else None
                    _STUB[prefix + node.name] = ("(" + ast.unparse(args) + ")", ret)
                elif isinstance(node, ast.ClassDef):
                    add(prefix + node.name + ".", node.body)

        add("", tree.body)
    return _STUB


def on_process_signature(app, what, name, obj, options, signature, return_annotation):
    module = getattr(obj, "__module__", None) or getattr(getattr(obj, "__objclass__", None), "__module__", None)
    if not name.startswith("dlbridge.") or name.startswith("dlbridge.check"):
        return None
    short = name[len("dlbridge."):]
    stub = _stub().get(short)
    if stub is None or module not in (None, "dlbridge._glue", "dlbridge") and not short.startswith("Tensor."):
        return None
    if what in ("property", "attribute"):
        return (signature, stub[1])
    return stub


def on_missing_reference(app, env, node, contnode):
    """Doxygen's link to a struct's field (dlb_export_options.stream) that
    breathe made no label for goes to the struct."""
    m = re.match(r"^(struct[A-Za-z0-9_]+?)_1[0-9a-f]{32,}$", node.get("reftarget", ""))
    if node.get("reftype") != "ref" or not m:
        return None
    label = env.domaindata["std"]["anonlabels"].get(m.group(1).lower())
    if not label:
        return None
    docname, labelid = label
    uri = app.builder.get_relative_uri(node["refdoc"], docname) + "#" + labelid
    return nodes.reference("", "", contnode, internal=True, refuri=uri)


def on_process_docstring(app, what, name, obj, options, lines):
    """The extension's docstrings (written in C) are plain text: a `*` there is
    a star, not emphasis."""
    module = getattr(obj, "__module__", None) or getattr(getattr(obj, "__objclass__", None), "__module__", None)
    if module == "dlbridge._glue" or name.startswith("dlbridge.Tensor"):
        lines[:] = [l.replace("*", "\\*") for l in lines]


def setup(app):
    app.connect("missing-reference", on_missing_reference)
    app.connect("autodoc-process-docstring", on_process_docstring)
    app.add_config_value("dlbridge_unlinked_names", [], "env")
    app.add_config_value("dlbridge_unlinked_pages", [], "env")
    app.add_config_value("dlbridge_foreign_pages", [], "env")
    app.connect("source-read", on_source_read)
    app.connect("doctree-resolved", on_doctree_resolved)
    app.connect("autodoc-process-signature", on_process_signature)
    app.add_transform(LinkNames)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
