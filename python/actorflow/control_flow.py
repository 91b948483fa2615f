"""tf.cond and tf.while_loop over graph/control_flow.hpp: the C++ builder calls the Python
branches and bodies while it is inside their context, so the ops they make go there (only the
taken branch runs; a loop's body runs once per iteration, with gradients through both).

    y = tf.cond(x > 0, lambda: x * 2.0, lambda: -x)
    i, acc = tf.while_loop(lambda i, acc: i < 10, lambda i, acc: (i + 1, acc * 2.0), (0, 1.0))

Branches and bodies may return Tensors (or values tf.constant takes) in lists, tuples,
namedtuples and dicts; both branches the same structure, a body that of its loop variables.
"""

from actorflow import _actorflow as _c
from actorflow import dtypes
from actorflow.framework import Operation, convert_to_tensor


def _flatten(structure):
    if isinstance(structure, dict):
        return [leaf for key in sorted(structure) for leaf in _flatten(structure[key])]
    if isinstance(structure, (list, tuple)):
        return [leaf for item in structure for leaf in _flatten(item)]
    return [structure]


def _pack(structure, leaves):
    """`leaves` (in _flatten's order) in the shape of `structure`."""
    leaves = iter(leaves)

    def pack(s):
        if isinstance(s, dict):
            packed = {key: pack(s[key]) for key in sorted(s)}
            return type(s)((key, packed[key]) for key in s)
        if isinstance(s, tuple) and hasattr(s, "_fields"):
            return type(s)(*[pack(item) for item in s])
        if isinstance(s, (list, tuple)):
            return type(s)(pack(item) for item in s)
        return next(leaves)

    return pack(structure)


def _kind(structure):
    """The structure without its leaves, to compare two branches' or a body's results."""
    if isinstance(structure, dict):
        return (type(structure), tuple((k, _kind(structure[k])) for k in sorted(structure)))
    if isinstance(structure, (list, tuple)):
        return (tuple if isinstance(structure, tuple) else list,
                tuple(_kind(item) for item in structure))
    return None


def _outputs(values, what):
    outputs = []
    for value in _flatten(values):
        if isinstance(value, Operation):
            raise TypeError("%s returned the Operation %r; actorflow's control flow returns "
                            "Tensors (use tf.identity after tf.control_dependencies)"
                            % (what, value.name))
        if value is None:
            raise ValueError("%s returned None; it must return Tensors" % what)
        outputs.append(convert_to_tensor(value)._output)
    return outputs


def cond(pred, true_fn=None, false_fn=None, strict=False, name=None, fn1=None, fn2=None):
    """true_fn()'s values where the bool scalar `pred` is true, false_fn()'s otherwise; only the
    taken branch runs."""
    true_fn = true_fn if true_fn is not None else fn1
    false_fn = false_fn if false_fn is not None else fn2
    if not callable(true_fn):
        raise TypeError("true_fn must be callable, not %r" % (true_fn,))
    if not callable(false_fn):
        raise TypeError("false_fn must be callable, not %r" % (false_fn,))
    pred = convert_to_tensor(pred)
    graph = pred.graph
    returned = {}

    def branch(fn, key):
        def call():
            with graph.as_default():
                value = fn()
            returned[key] = value
            return _outputs(value, "cond's %s" % key)
        return call

    merged = graph._built(_c.cond(pred._output, branch(true_fn, "true_fn"),
                                  branch(false_fn, "false_fn"), name or "cond"))
    if _kind(returned["true_fn"]) != _kind(returned["false_fn"]):
        raise ValueError("cond: true_fn and false_fn must return the same structure, got %r "
                         "and %r" % (returned["true_fn"], returned["false_fn"]))
    results = [graph._tensor(o) for o in merged]
    value = _pack(returned["true_fn"], results)
    if not strict and isinstance(value, (list, tuple)) and len(value) == 1 and \
            not hasattr(value, "_fields"):
        return value[0]
    return value


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10,
               back_prop=True, swap_memory=False, name=None, maximum_iterations=None,
               return_same_structure=False):
    """Repeats body(*loop_vars) while cond(*loop_vars) holds; the loop variables' final values,
    in loop_vars' structure."""
    if not callable(cond):
        raise TypeError("cond must be callable, not %r" % (cond,))
    if not callable(body):
        raise TypeError("body must be callable, not %r" % (body,))
    if not back_prop or swap_memory:
        raise ValueError("while_loop: back_prop=False and swap_memory are not supported yet")
    single = not isinstance(loop_vars, (list, tuple, dict))
    structure = [loop_vars] if single else loop_vars
    leaves = _flatten(structure)
    if not leaves:
        raise ValueError("No loop variables provided")
    initial = [convert_to_tensor(v) for v in leaves]
    graph = initial[0].graph
    invariants = []
    if shape_invariants is not None:
        flat = _flatten([shape_invariants] if single else shape_invariants)
        if len(flat) != len(leaves):
            raise ValueError("while_loop: %d loop variables but %d shape invariants"
                             % (len(leaves), len(flat)))
        for s in flat:
            shape = dtypes.TensorShape(s)
            invariants.append(None if shape.ndims is None else list(shape.as_list()))

    def arguments(outputs):
        tensors = [graph._tensor(o) for o in outputs]
        return _pack(structure, tensors)

    def call_cond(outputs):
        with graph.as_default():
            args = arguments(outputs)
            value = cond(args) if isinstance(structure, dict) else cond(*args)
        result = convert_to_tensor(value)
        if result.dtype != dtypes.bool:
            raise TypeError("while_loop's cond must return a bool Tensor, got %s" % result.dtype)
        return result._output

    def call_body(outputs):
        with graph.as_default():
            args = arguments(outputs)
            value = body(args) if isinstance(structure, dict) else body(*args)
        if single and not isinstance(value, (list, tuple)):
            value = [value]
        if len(_flatten(value)) != len(leaves):
            raise ValueError("while_loop's body must return the structure of loop_vars (%d "
                             "values), got %r" % (len(leaves), value))
        return _outputs(value, "while_loop's body")

    finals = graph._built(_c.while_loop(call_cond, call_body, [t._output for t in initial],
                                        int(parallel_iterations),
                                        None if maximum_iterations is None
                                        else int(maximum_iterations),
                                        invariants, name or "while"))
    results = [graph._tensor(o) for o in finals]
    if single and not return_same_structure:
        return results[0]
    return _pack(structure, results)
