"""dlbridge tensors in Dask distributed's own serialization.

Pickle protocol 5 is the tensor's way into every engine
(``Tensor.__reduce_ex__``, ``_pickle.c``), and Ray and Dask's workers pickle
with it. Dask's scheduler, however, holds its connections to pickle
protocol 4 (``handshake_overrides={"pickle-protocol": 4}`` in
``distributed/scheduler.py``), so an object that a client scatters or
gathers through the scheduler is pickled with its elements in-band: a copy
into the message and a copy out. numpy arrays avoid that with a Dask
serializer of their own, and so do dlbridge tensors: the serializer below
is the same protocol-5 pickle, whatever the connection's protocol, with
the tensor's memory as a frame of its own.

The serializer is registered when ``distributed.protocol.serialize`` is
imported, before or after dlbridge; ``import dlbridge`` imports no part
of Dask.
"""

import pickle
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import Tensor

_SERIALIZE = "distributed.protocol.serialize"


def _dask_serialize(tensor: Tensor) -> Tuple[Dict[str, Any], List[Any]]:
    buffers: List[pickle.PickleBuffer] = []
    head = pickle.dumps(tensor, protocol=5, buffer_callback=buffers.append)
    return {}, [head] + [b.raw() for b in buffers]


def _dask_deserialize(header: Dict[str, Any], frames: Sequence[Any]) -> Tensor:
    tensor: Tensor = pickle.loads(frames[0], buffers=frames[1:])
    return tensor


def _register(module: Any) -> None:
    module.dask_serialize.register(Tensor)(_dask_serialize)
    module.dask_deserialize.register(Tensor)(_dask_deserialize)


class _DaskLoader:
    """Runs the real loader of distributed.protocol.serialize, then registers."""

    def __init__(self, loader: Any, hook: "_DaskHook") -> None:
        self._loader = loader
        self._hook = hook

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        _register(module)
        self._hook.remove()


class _DaskHook:
    """A sys.meta_path finder that sees distributed.protocol.serialize being
    imported; it finds nothing itself and leaves once it has registered."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if fullname != _SERIALIZE:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _DaskLoader(spec.loader, self)
                return spec
        return None

    def remove(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


if _SERIALIZE in sys.modules:
    _register(sys.modules[_SERIALIZE])
else:
    sys.meta_path.insert(0, _DaskHook())
