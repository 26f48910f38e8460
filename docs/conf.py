# The documentation site (Sphinx): built by scripts/docs into build/docs/html.
# docs/maintainers/docs-site.md says how a page joins it.
#
# scripts/docs sets the environment this file reads:
#   DLBRIDGE_DOXYGEN_XML  Doxygen's XML of include/dlbridge (breathe reads it)
#   DLBRIDGE_VERSION      the project's version (meson.build)
#   PYTHONPATH            <build>/python, so that autodoc imports the built package

import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "_ext"))

project = "dlbridge"
author = "the dlbridge authors"
copyright = "the dlbridge authors"
version = release = os.environ.get("DLBRIDGE_VERSION", "")

extensions = [
    "myst_parser",
    "breathe",
    "sphinx.ext.autodoc",
    "dlbridge_site",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
# docs/api is where a plain Doxygen build of an older checkout went.
exclude_patterns = ["api", "_ext", "Thumbs.db", ".DS_Store"]

# Every reference must resolve: a guide naming a C or Python name that no
# longer exists fails the build (scripts/docs runs sphinx-build -W).
nitpicky = True
nitpick_ignore = [
    # Python's own types in signatures of the extension's stubs.
    ("py:class", "Any"),
    ("py:class", "Optional"),
    ("py:class", "Tuple"),
    ("py:class", "Type"),
    ("py:class", "Union"),
    ("py:class", "Iterable"),
    ("py:class", "Sequence"),
    ("py:class", "SupportsIndex"),
    ("py:class", "Device"),
    ("py:class", "dlbridge.Device"),
    ("py:class", "dlbridge.check.Report"),
    # DLPack's own declarations (dlpack.h is not part of this reference).
    ("c:identifier", "DLTensor"),
    ("c:identifier", "DLDevice"),
    ("c:identifier", "DLDataType"),
    ("c:identifier", "DLManagedTensor"),
    ("c:identifier", "DLManagedTensorVersioned"),
    ("c:identifier", "DLPackVersion"),
    ("c:identifier", "DLDeviceType"),
    ("c:identifier", "int8_t"),
    ("c:identifier", "int16_t"),
    ("c:identifier", "int32_t"),
    ("c:identifier", "int64_t"),
    ("c:identifier", "uint8_t"),
    ("c:identifier", "uint16_t"),
    ("c:identifier", "uint32_t"),
    ("c:identifier", "uint64_t"),
    ("c:identifier", "size_t"),
    ("c:identifier", "uintptr_t"),
    ("c:identifier", "pid_t"),
]

# Inline code that looks like a C or Python name but is not one (environment
# variables), and pages whose names are not linked (the changelog names
# calls that were removed).
dlbridge_unlinked_names = ["DLB_COPY_ISA", "DLB_COPY_THREADS", "DLB_FUZZ_SEED", "DLB_TEST_CUDA_DRIVER",
                           "DLB_TEST_FAKE_CUDA", "DLB_TEST_GCOV_DUMP", "DLB_TEST_NATIVE_ADDON", "DLB_TEST_PYTHONPATH"]
dlbridge_unlinked_pages = ["changelog"]
# Pages of other languages, where `dlbridge.X` names that language's API, not
# Python's: their C names are linked, their dotted names are not.
dlbridge_foreign_pages = ["go", "java", "javascript", "reference/go-api", "reference/java-api", "reference/javascript-api"]

# MyST: `#anchor` links to headings up to ###, tables, and the scheme that
# links into the Rust reference (cargo doc, copied to html/rust/ by
# scripts/docs): [Buffer](rustdoc:dlbridge/struct.Buffer.html).
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
myst_url_schemes = ["http", "https", "mailto", "rustdoc"]

breathe_projects = {"dlbridge": os.environ.get("DLBRIDGE_DOXYGEN_XML", "")}
breathe_default_project = "dlbridge"
breathe_domain_by_extension = {"h": "c"}
breathe_show_include = False

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "undoc-members": False}

html_theme = "furo"
html_title = "dlbridge " + version if version else "dlbridge"
html_static_path = []
html_show_sourcelink = False
html_copy_source = False
# No web fonts or scripts from elsewhere: the site works offline.
html_theme_options = {"navigation_with_keys": True}
