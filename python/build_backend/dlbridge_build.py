"""The build backend named in pyproject.toml: meson-python's own hooks.

pyproject.toml asks meson-python for a limited-API (abi3) wheel with
``[tool.meson-python] limited-api = true``, a key meson-python reads since
0.14; an isolated build installs a release that has it. Debian 12's
meson-python 0.12 (the offline route: ``pip install --no-build-isolation .``
with the system's packages) stops at any key it does not know. For such a
release only, the key is accepted and left unread: meson-python 0.12 tags
the wheel abi3 by itself, from the extension's file name (_glue.abi3.so).
Nothing else differs from using ``mesonpy`` as the backend directly.
"""

import re

import mesonpy

_HOOKS = (
    "build_sdist",
    "build_wheel",
    "build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "get_requires_for_build_editable",
    "prepare_metadata_for_build_wheel",
    "prepare_metadata_for_build_editable",
)


def _release(text: str) -> tuple:
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


if _release(mesonpy.__version__) < (0, 14):
    _check_keys = mesonpy.Project._check_for_unknown_config_keys

    def _check_keys_but_limited_api(self, valid_args):  # type: ignore[no-untyped-def]
        return _check_keys(self, {**valid_args, "limited-api": ()})

    mesonpy.Project._check_for_unknown_config_keys = _check_keys_but_limited_api

for _name in _HOOKS:
    if hasattr(mesonpy, _name):
        globals()[_name] = getattr(mesonpy, _name)
