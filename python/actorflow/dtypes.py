"""Element types and static shapes (tf.DType, tf.TensorShape).

    tf.float32.as_numpy_dtype      # numpy.float32
    tf.as_dtype(np.int64)          # tf.int64
    t.shape.as_list()              # [None, 784]

actorflow has five dtypes: float32, float64, int32, int64 and bool.
"""

import builtins

import numpy as np


class DType:
    """One element type; compares equal to itself, its name and its numpy dtype."""

    def __init__(self, name, numpy_type):
        self._name = name
        self._numpy_type = numpy_type

    @property
    def name(self):
        return self._name

    @property
    def as_numpy_dtype(self):
        return self._numpy_type

    @property
    def size(self):
        """Bytes per element."""
        return np.dtype(self._numpy_type).itemsize

    @property
    def base_dtype(self):
        return self

    @property
    def is_floating(self):
        return self._name in ("float32", "float64")

    @property
    def is_integer(self):
        return self._name in ("int32", "int64")

    @property
    def is_bool(self):
        return self._name == "bool"

    def __eq__(self, other):
        try:
            return as_dtype(other) is self
        except TypeError:
            return False

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self._name)

    def __repr__(self):
        return "tf." + self._name

    def __str__(self):
        return "<dtype: %r>" % self._name


float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
bool = DType("bool", np.bool_)  # noqa: A001 - TF's own name, tf.bool
double = float64

_BY_NAME = {t.name: t for t in (float32, float64, int32, int64, bool)}


def as_dtype(value):
    """The DType for a DType, its name, a numpy dtype or type, or Python's float/int/bool."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    if value is float:
        return float32
    if value is int:
        return int32
    if value is builtins.bool:
        return bool
    try:
        numpy_type = np.dtype(value)
    except TypeError:
        raise TypeError("Cannot convert %r to an actorflow dtype" % (value,)) from None
    name = "bool" if numpy_type == np.bool_ else numpy_type.name
    if name not in _BY_NAME:
        raise TypeError("actorflow has no dtype for %s (float32, float64, int32, int64 and bool "
                        "exist)" % numpy_type.name)
    return _BY_NAME[name]


class TensorShape:
    """A static shape: None for an unknown rank, else dimensions, None where one is unknown."""

    def __init__(self, dims):
        if isinstance(dims, TensorShape):
            dims = dims._dims
        if dims is None:
            self._dims = None
        else:
            self._dims = [None if d is None or (isinstance(d, int) and d < 0) else int(d)
                          for d in dims]

    @property
    def dims(self):
        return None if self._dims is None else list(self._dims)

    @property
    def ndims(self):
        return None if self._dims is None else len(self._dims)

    rank = ndims

    def as_list(self):
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self._dims)

    def is_fully_defined(self):
        return self._dims is not None and all(d is not None for d in self._dims)

    def num_elements(self):
        if not self.is_fully_defined():
            return None
        return int(np.prod(self._dims, dtype=np.int64))

    def is_compatible_with(self, other):
        other = TensorShape(other)
        if self._dims is None or other._dims is None:
            return True
        if len(self._dims) != len(other._dims):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self._dims, other._dims))

    def __len__(self):
        if self._dims is None:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self._dims)

    def __iter__(self):
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __getitem__(self, key):
        if self._dims is None:
            return None
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return self._dims[key]

    def __eq__(self, other):
        try:
            other = TensorShape(other)
        except TypeError:
            return NotImplemented
        return self._dims == other._dims

    def __hash__(self):
        return hash(None if self._dims is None else tuple(self._dims))

    def __repr__(self):
        return "TensorShape(%r)" % (self._dims,)

    def __str__(self):
        if self._dims is None:
            return "<unknown>"
        text = ", ".join("?" if d is None else str(d) for d in self._dims)
        return "(%s,)" % text if len(self._dims) == 1 else "(%s)" % text
