# The addon, built by node-gyp: lib/install.js runs it when the package is
# installed with a libdlbridge that pkg-config finds (or with
# DLBRIDGE_NODE_INSTALL=source), and scripts/node-package for the prebuilt
# addon the package carries. lib/gyp-flags.js gives the headers and the
# library: DLBRIDGE_INCLUDE_DIR / DLBRIDGE_LIB_DIR when set, else pkg-config.
{
  "targets": [{
    "target_name": "dlbridge_node",
    "sources": ["src/dlbridge_node.c"],
    "defines": ["NAPI_VERSION=8"],
    "include_dirs": ["<!@(node lib/gyp-flags.js include)"],
    "cflags_c": ["-std=gnu11", "-Wall", "-Wextra", "-Werror"],
    "libraries": ["<!@(node lib/gyp-flags.js libs)"],
    "ldflags": ["<!(node lib/gyp-flags.js rpath)"]
  }]
}
