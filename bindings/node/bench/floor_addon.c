/* The floor of bindings/node/bench/export.js: what N-API itself costs for
 * one JavaScript object owning native memory. external() makes a bare
 * napi_create_external whose finalizer frees a malloc'd block (a handle of
 * the binding's size); call() is an addon call that does nothing. */
#include <node_api.h>
#include <stdlib.h>

static void release(napi_env env, void* data, void* hint) {
  (void)env, (void)hint;
  free(data);
}

static napi_value external(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value v;
  void* block = malloc(16);
  if (!block || napi_create_external(env, block, release, NULL, &v) != napi_ok) {
    free(block);
    napi_throw_error(env, NULL, "napi_create_external failed");
    return NULL;
  }
  return v;
}

static napi_value call(napi_env env, napi_callback_info info) {
  (void)env, (void)info;
  return NULL;
}

NAPI_MODULE_INIT() {
  napi_value f;
  if (napi_create_function(env, "external", NAPI_AUTO_LENGTH, external, NULL, &f) != napi_ok ||
      napi_set_named_property(env, exports, "external", f) != napi_ok ||
      napi_create_function(env, "call", NAPI_AUTO_LENGTH, call, NULL, &f) != napi_ok ||
      napi_set_named_property(env, exports, "call", f) != napi_ok)
    return NULL;
  return exports;
}
