/* dlbridge's side of the DLPack 1.3 C exchange API in the dlbridge._glue
 * extension (python/dlbridge/_exchange.c): the table dlbridge.Tensor
 * publishes, and the consumer path of dlbridge.from_dlpack. Every function
 * here needs the GIL. Included by _glue.h. */
#ifndef DLBRIDGE_PYTHON_EXCHANGE_H_
#define DLBRIDGE_PYTHON_EXCHANGE_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlbridge/dlbridge.h>

struct dlbpy_state;

enum { DLBPY_CACHE_SLOTS = 64 };

/* One producer type's exchange table as last looked up. */
typedef struct dlbpy_cache_entry {
  PyObject* type;    /* owned; NULL: empty slot */
  PyObject* capsule; /* owned; NULL: the type has no table */
  const DLPackExchangeAPI* api; /* NULL: none usable (fall back) */
  int recheck;       /* exchanges left before a type without a table is looked at again */
  int fixed;         /* the lookup cannot give another answer: never repeated */
  unsigned bits;     /* DLBPY_BIT_*: the producer-state queries the type has (is_conj, is_neg) */
} dlbpy_cache_entry;

/* The module state's cache of exchange tables: bounded (DLBPY_CACHE_SLOTS
 * types; a full neighbourhood gives up an entry), its references released
 * by the module's m_clear. */
typedef struct dlbpy_exchange_cache {
  dlbpy_cache_entry slots[DLBPY_CACHE_SLOTS];
  unsigned evict;          /* which probe a full neighbourhood gives up next */
  PyObject* attr_name;     /* "__dlpack_c_exchange_api__" */
  PyObject* attr_name_old; /* "__c_dlpack_exchange_api__" */
  PyObject* bit_query[2];  /* "is_conj", "is_neg": producer state DLPack cannot carry (_cure.c) */
  PyObject* bit_resolve[2]; /* "resolve_conj", "resolve_neg" */
} dlbpy_exchange_cache;

/* Producer state a DLPack tensor cannot carry, each bit a query method a
 * producer type may have (torch: is_conj(), is_neg()); see _cure.c. */
enum { DLBPY_BIT_CONJ = 1u, DLBPY_BIT_NEG = 2u };

/* Fills the names; 0, or -1 with an exception set. */
int dlbpy_exchange_cache_init(dlbpy_exchange_cache* cache);
/* Drops every reference the cache holds (m_clear). */
void dlbpy_exchange_cache_clear(dlbpy_exchange_cache* cache);
/* Visits them (m_traverse). */
int dlbpy_exchange_cache_traverse(dlbpy_exchange_cache* cache, visitproc visit, void* arg);

/* A new PyCapsule named "dlpack_exchange_api" holding dlbridge's table (a
 * static DLPackExchangeAPI that lives as long as the process), for the
 * class attribute dlbridge.Tensor.__dlpack_c_exchange_api__. NULL with an
 * exception set on failure. */
PyObject* dlbpy_exchange_capsule(void);

/* dlbridge.from_dlpack(obj, device=, copy=) through the exchange table of
 * type(obj), when it has a usable one. `device` is NULL or the requested
 * (device_type, device_id); `policy` a dlb_copy_policy, delivered by
 * dlbpy_deliver. `fresh`: obj is a new tensor only this call holds (a
 * producer's resolve_conj()), imported as a copy.
 *
 * A producer whose state DLPack cannot carry (its is_conj() or is_neg()
 * true) is answered by dlbpy_resolve_bits (_cure.c), with *handled 1.
 * *handled is set to 0 when type(obj) publishes no table dlbridge can use
 * (none, a capsule of another name, no 1.x table along prev_api, a NULL
 * managed_tensor_from_py_object_no_sync): the caller falls back to
 * __dlpack__, nothing was allocated, and *bits says which DLBPY_BIT_*
 * queries type(obj) has (the caller asks them before __dlpack__).
 * Otherwise *handled is 1 and the result is a new dlbridge.Tensor, or NULL
 * with the exception set (the producer's own when its function failed). */
PyObject* dlbpy_exchange_from_dlpack(struct dlbpy_state* state, PyObject* obj, const long long* device,
                                     int policy, int fresh, int* handled, unsigned* bits);

/* The DLBPY_BIT_* queries `type` has (its entry's when the cache has one,
 * else looked up now); never fails. */
unsigned dlbpy_exchange_type_bits(struct dlbpy_state* state, PyObject* type);

#endif /* DLBRIDGE_PYTHON_EXCHANGE_H_ */
