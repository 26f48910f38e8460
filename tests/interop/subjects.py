"""Subjects for scripts/conformance that the frameworks do not offer as one
object: a capsule-only producer wrapped in the Python protocol, the way a
consumer taking objects would have to wrap it."""


class CapsuleOnly:
    """`__dlpack__()` is the framework's capsule function (no keywords, so a
    consumer's max_version= raises TypeError, as from any legacy producer);
    `__dlpack_device__()` is the tensor's own."""

    def __init__(self, tensor, to_dlpack, name):
        self._tensor = tensor
        self._to_dlpack = to_dlpack
        self._name = name
        self.shape = tuple(int(x) for x in tensor.shape)

    def __dlpack__(self, stream=None):
        if stream is not None:
            raise BufferError("stream must be None on the CPU")
        return self._to_dlpack(self._tensor)

    def __dlpack_device__(self):
        return self._tensor.__dlpack_device__()

    def __repr__(self):
        return "%s(%s)" % (self._name, self.shape)


def tf_capsule(values, dtype="float32"):
    """tf.experimental.dlpack.to_dlpack of tf.constant(values, dtype)."""
    import tensorflow as tf

    return CapsuleOnly(tf.constant(values, dtype=dtype), tf.experimental.dlpack.to_dlpack,
                       "tf.experimental.dlpack.to_dlpack")


def paddle_capsule(values, dtype="float32"):
    """paddle.utils.dlpack.to_dlpack of paddle.to_tensor(values, dtype)."""
    import paddle

    return CapsuleOnly(paddle.to_tensor(values, dtype=dtype), paddle.utils.dlpack.to_dlpack,
                       "paddle.utils.dlpack.to_dlpack")
