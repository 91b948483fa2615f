"""Graph construction from Python: default graphs, scopes, the views of nodes, and the
AttributeError for what actorflow has not."""

import numpy as np
import pytest

import actorflow
import actorflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.reset_default_graph()
    yield


def test_compat_v1_holds_the_same_objects_as_actorflow():
    for name in ("Session", "Variable", "constant", "matmul", "ConfigProto", "float32",
                 "placeholder", "gradients"):
        assert getattr(tf, name) is getattr(actorflow, name)
    assert tf.train is actorflow.train and tf.nn is actorflow.nn and tf.errors is actorflow.errors
    assert tf.train.GradientDescentOptimizer is actorflow.train.GradientDescentOptimizer


@pytest.mark.parametrize("module, name", [(tf, "cumprod"), (tf, "map_fn"),
                                          (tf.nn, "ctc_loss"), (tf.train, "QueueRunner"),
                                          (tf.math, "cumprod"),
                                          (tf.losses, "huber_loss")])
def test_a_name_actorflow_lacks_raises_attribute_error_naming_it(module, name):
    with pytest.raises(AttributeError, match="'%s'" % name):
        getattr(module, name)


def test_unique_names_and_name_scopes_follow_tf():
    a = tf.constant(1.0)
    b = tf.constant(2.0)
    c = a * b
    d = a * b
    with tf.name_scope("layer") as scope:
        e = tf.constant(3.0, name="w")
    with tf.name_scope("layer"):
        f = tf.add(e, e)
    assert [t.op.name for t in (a, b, c, d, e, f)] == \
        ["Const", "Const_1", "mul", "mul_1", "layer/w", "layer_1/Add"]
    assert scope == "layer/"
    assert c.name == "mul:0" and c.op.type == "Mul"


def test_a_graph_made_default_receives_the_ops_and_the_old_default_does_not():
    g = tf.Graph()
    outer = tf.get_default_graph()
    with g.as_default():
        assert tf.get_default_graph() is g
        x = tf.constant(1.0)
    assert x.graph is g and x.op.graph is g
    assert tf.get_default_graph() is outer
    assert outer.get_operations() == []
    assert g.get_operations() == [x.op]
    assert g.get_tensor_by_name("Const:0") is x
    assert g.get_operation_by_name("Const") is x.op


def test_reset_default_graph_gives_a_new_empty_graph_and_refuses_inside_a_graph_block():
    old = tf.get_default_graph()
    tf.constant(1.0)
    tf.reset_default_graph()
    assert tf.get_default_graph() is not old
    assert tf.get_default_graph().get_operations() == []
    with tf.Graph().as_default():
        with pytest.raises(AssertionError):
            tf.reset_default_graph()


def test_tensors_and_operations_describe_their_nodes():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.Variable(np.zeros((3, 2), np.float32), name="w")
    y = tf.matmul(x, w)
    assert y.dtype == tf.float32 and y.dtype == np.float32 and y.dtype == "float32"
    assert y.shape.as_list() == [None, 2] and y.get_shape().ndims == 2
    assert str(y.shape) == "(?, 2)"
    assert y.op.inputs == [x, w.value()]
    assert y.op.outputs == [y]
    assert w.op.type == "VariableV2" and w.name == "w:0"
    assert w.initializer.type == "Assign" and w.initializer.name == "w/Assign"
    assert w.value().op.name == "w/read"
    assert w.shape.as_list() == [3, 2]
    assert tf.placeholder(tf.int64).shape.ndims is None


def test_device_scopes_merge_and_device_specs_and_functions_choose():
    with tf.device("/job:worker"):
        with tf.device("/gpu:1"):
            a = tf.constant(1.0)
        with tf.device(tf.DeviceSpec(job="ps", task=2, device_type="CPU", device_index=0)):
            b = tf.constant(2.0)
    assert a.device == "/job:worker/device:GPU:1"
    assert b.device == "/job:ps/task:2/device:CPU:0"

    seen = []

    def by_type(op):
        seen.append((op.type, op.name))
        return "/cpu:0" if op.type == "VariableV2" else "/device:GPU:0"

    with tf.device(by_type):
        v = tf.Variable(1.0, name="v")
        c = v * 2.0
    assert v.device == "/device:CPU:0"
    assert c.device == "/device:GPU:0"
    assert ("VariableV2", "v") in seen and ("Mul", "mul") in seen


def test_an_exception_in_a_device_function_reaches_the_caller():
    def broken(op):
        raise KeyError("no device for " + op.name)

    with tf.device(broken):
        with pytest.raises(KeyError, match="no device for Const"):
            tf.constant(1.0)


def test_a_bad_device_string_is_a_value_error_quoting_it():
    with pytest.raises(ValueError, match="/gpu:x"):
        with tf.device("/gpu:x"):
            pass


def test_control_dependencies_and_colocation_reach_the_nodes():
    a = tf.constant(1.0)
    b = a + 2.0
    with tf.control_dependencies([a, b.op]):
        x = tf.constant(3.0)
    y = tf.constant(4.0)
    assert x.op.control_inputs == [a.op, b.op]
    assert y.op.control_inputs == []
    with tf.device("/job:ps/task:1"):
        v = tf.Variable(1.0)
    with tf.device("/job:worker"):
        with tf.colocate_with(v):
            z = tf.identity(v)
    assert z.device == "/job:ps/task:1"


def test_a_shape_error_raises_value_error_naming_the_node():
    a = tf.constant(np.zeros((2, 3), np.float32))
    b = tf.constant(np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match="MatMul"):
        tf.matmul(a, b)


def test_mixing_graphs_is_a_value_error():
    a = tf.constant(1.0)
    with tf.Graph().as_default():
        b = tf.constant(2.0)
    with pytest.raises(ValueError, match="same graph"):
        tf.add(a, b)


def test_tensors_are_not_python_bools_and_compare_by_identity():
    a = tf.constant(1.0)
    with pytest.raises(TypeError, match="bool"):
        bool(a)
    assert (a == a) is True and (a == tf.constant(1.0)) is False
    assert {a: 1}[a] == 1


def test_global_and_trainable_variables_and_the_initializer():
    v = tf.Variable(1.0, name="v")
    w = tf.Variable(2.0, name="w", trainable=False)
    assert tf.global_variables() == [v, w]
    assert tf.trainable_variables() == [v]
    init = tf.global_variables_initializer()
    assert init.type == "NoOp" and init.name == "init"
    assert set(init.control_inputs) == {v.initializer, w.initializer}


def test_a_scope_made_but_not_entered_changes_nothing_and_scopes_end_in_order():
    unused = tf.device("/job:ps")
    with tf.device("/job:worker"):
        with tf.name_scope("outer"):
            a = tf.constant(1.0)
        b = tf.constant(2.0)
    c = tf.constant(3.0)
    del unused
    assert (a.op.name, a.device) == ("outer/Const", "/job:worker")
    assert (b.op.name, b.device) == ("Const", "/job:worker")
    assert (c.op.name, c.device) == ("Const_1", "")
