# The addon (build/Release/dlbridge_node.node), built offline by the
# node-gyp that npm bundles against the installed Node's headers:
#   DLBRIDGE_LIB_DIR=<dir of libdlbridge.so> node-gyp rebuild --nodedir=/usr
# DLBRIDGE_INCLUDE_DIR names the headers (default: this repository's
# include/); without DLBRIDGE_LIB_DIR the system's libdlbridge is linked.
{
  "targets": [{
    "target_name": "dlbridge_node",
    "sources": ["src/dlbridge_node.c"],
    "include_dirs": ["<!(node -p \"process.env.DLBRIDGE_INCLUDE_DIR || '../../include'\")"],
    "cflags_c": ["-std=gnu11", "-Wall", "-Wextra", "-Werror"],
    "libraries": ["<!@(node -p \"const d = process.env.DLBRIDGE_LIB_DIR; d ? '-L' + d + ' -Wl,-rpath,' + d + ' -ldlbridge' : '-ldlbridge'\")"]
  }]
}
