"""tf.math: TF 1.x's math namespace (tf.math.maximum is tf.maximum). Names TF has there and
actorflow does not raise AttributeError saying so."""

from actorflow._missing import missing_names
from actorflow.ops import (abs, add, add_n, argmax, argmin, ceil, cumsum, cos, divide, equal, exp,  # noqa: F401,A004
                           expm1, floor, is_finite, is_inf, is_nan, log1p, reduce_logsumexp, sin,
                           floordiv, floormod, greater, greater_equal, less, less_equal, log,
                           logical_and, logical_not, logical_or, logical_xor, maximum, minimum,
                           mod, multiply, negative, not_equal, pow, reciprocal, reduce_all,
                           reduce_any, reduce_max, reduce_mean, reduce_min, reduce_prod,
                           reduce_sum, round, rsqrt, sigmoid, sign, sqrt, square,
                           squared_difference, subtract, tanh, truediv, unsorted_segment_sum)

__getattr__ = missing_names(__name__)
