"""actorflow from Python: TensorFlow 1.x's graph-and-session API over actorflow's C++ runtime.

    import actorflow.compat.v1 as tf      # the same objects as `import actorflow as tf`
    a = tf.Variable(3.0)
    with tf.Session() as sess:            # or tf.Session("grpc://host:port") on a server
        sess.run(a.initializer)
        print(sess.run(a * 4.0))          # 12.0

Names TF has and actorflow does not yet raise AttributeError saying so.
"""

from actorflow import distribute, errors, layers, losses, math, nn, summary, train
from actorflow._missing import missing_names
from actorflow.dtypes import (DType, TensorShape, as_dtype, bool, double, float32,  # noqa: A004
                              float64, int32, int64)
from actorflow.control_flow import cond, while_loop
from actorflow.framework import (DeviceSpec, Graph, IndexedSlices, Operation, Tensor, Variable,
                                 colocate_with,
                                 control_dependencies, convert_to_tensor, device,
                                 get_default_graph, name_scope, reset_default_graph,
                                 set_random_seed)
from actorflow.ops import (abs, boolean_mask, ceil, cumsum, clip_by_global_norm, clip_by_norm, clip_by_value,  # noqa: A004
                           cos, embedding_lookup, expand_dims, expm1, global_norm, is_finite,
                           is_inf, is_nan, log1p, reduce_logsumexp, sin, stop_gradient, floor, floor_div, floordiv, floormod, logical_or, logical_xor, maximum,
                           minimum, mod, not_equal, one_hot, pow, range, reciprocal, reduce_all,
                           reduce_any, reduce_min, reduce_prod, round, rsqrt, scatter_add,
                           scatter_sub, scatter_update, sign, squared_difference, squeeze, stack,
                           unique, unsorted_segment_sum, where, where_v2)
from actorflow.ops import (add, add_n, all_variables, arg_max, arg_min, argmax, argmin, assign, assign_add,
                           assign_sub, cast, concat, constant, div, divide, equal, exp, fill,
                           gather, global_variables, global_variables_initializer, gradients,
                           greater, greater_equal, group, identity, initialize_all_variables,
                           less, less_equal, log, logical_and, logical_not, matmul, multiply,
                           negative, no_op, ones, ones_like, placeholder, random_normal,
                           random_uniform, realdiv, reduce_max, reduce_mean, reduce_sum, reshape,
                           sigmoid, sqrt, square, subtract, tanh, to_float, to_int32, to_int64,
                           trainable_variables, truediv, truncated_normal, variables_initializer,
                           zeros, zeros_like)
from actorflow.ops import (pad, rank, shape, size, slice, split, strided_slice, tile,  # noqa: A004
                           transpose, unstack)
from actorflow.init_ops import (constant_initializer, fixed_size_partitioner,
                                glorot_normal_initializer, glorot_uniform_initializer,
                                initializers, min_max_variable_partitioner, ones_initializer,
                                random_normal_initializer, random_uniform_initializer,
                                truncated_normal_initializer, variable_axis_size_partitioner,
                                variance_scaling_initializer, zeros_initializer)
from actorflow.variable_scope import (AUTO_REUSE, GraphKeys, VariableScope, add_to_collection,
                                      get_collection, get_variable, get_variable_scope,
                                      variable_op_scope, variable_scope)
from actorflow.sparse import SparseTensor, SparseTensorValue
from actorflow.session import (ConfigProto, GPUOptions, InteractiveSession, RunMetadata, RunOptions, Session,
                               get_default_session)

newaxis = None
Summary = summary.Summary

__getattr__ = missing_names(__name__)
