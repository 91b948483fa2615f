"""tf.summary (python/actorflow/summary.py): summaries fetched as serialized Summary protobufs
and written by tf.summary.FileWriter as event files, read back here record by record (CRCs
checked) with a protobuf wire decoder of our own, so the test needs no TensorBoard."""

import glob
import struct

import crc32c
import numpy as np
import pytest

import actorflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.reset_default_graph()
    yield


def fields(data):
    """(field number, wire type, value) of a protobuf message: varints as ints, fixed64 and
    fixed32 as raw bytes, length-delimited as bytes."""
    out, at = [], 0
    def varint():
        nonlocal at
        shift = value = 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value
    while at < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, wire, varint()))
        elif wire == 1:
            out.append((number, wire, data[at:at + 8]))
            at += 8
        elif wire == 5:
            out.append((number, wire, data[at:at + 4]))
            at += 4
        elif wire == 2:
            n = varint()
            out.append((number, wire, data[at:at + n]))
            at += n
        else:
            raise AssertionError("wire type %d" % wire)
    return out


def summary_values(serialized):
    """{tag: simple_value or the histogram's {field: value}} of a serialized Summary."""
    values = {}
    for number, _, value in fields(serialized):
        assert number == 1
        tag, content = None, 0.0   # proto3 leaves a simple_value of 0 out
        for n, wire, v in fields(value):
            if n == 1:
                tag = v.decode()
            elif n == 2:
                content = struct.unpack("<f", v)[0]
            elif n == 5:
                histo = {}
                for hn, hwire, hv in fields(v):
                    if hwire == 1:
                        histo[hn] = struct.unpack("<d", hv)[0]
                    else:  # packed doubles
                        histo[hn] = list(struct.unpack("<%dd" % (len(hv) // 8), hv))
                content = histo
        values[tag] = content
    return values


def masked(data):
    crc = crc32c.crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def events(path):
    """(step, payload fields) of every record of an event file, both CRCs checked."""
    with open(path, "rb") as f:
        data = f.read()
    out, at = [], 0
    while at < len(data):
        length = struct.unpack("<Q", data[at:at + 8])[0]
        assert struct.unpack("<I", data[at + 8:at + 12])[0] == masked(data[at:at + 8])
        payload = data[at + 12:at + 12 + length]
        assert struct.unpack("<I", data[at + 12 + length:at + 16 + length])[0] == masked(payload)
        at += 16 + length
        out.append({n: v for n, _, v in fields(payload)})
    return out


def test_scalar_and_histogram_summaries_fetch_as_serialized_summaries():
    x = tf.placeholder(tf.float32, [None], name="x")
    with tf.name_scope("train"):
        loss = tf.summary.scalar("loss", tf.reduce_mean(x))
    spread = tf.summary.histogram("values", x)
    merged = tf.summary.merge_all()
    assert tf.summary.merge_all(key="nothing here") is None
    values = np.array([-3.0, 0.0, 0.5, 0.5, 2.0, 1e6], np.float32)
    with tf.Session() as sess:
        got_merged, got_loss, (nested,) = sess.run([merged, loss, [spread]], {x: values})
    assert isinstance(got_merged, bytes)
    assert summary_values(got_loss) == {"train/loss": pytest.approx(values.mean())}
    both = summary_values(got_merged)
    assert set(both) == {"train/loss", "values"}
    histo = both["values"]
    assert histo[1] == -3.0 and histo[2] == pytest.approx(1e6)     # min, max
    assert histo[3] == 6 and histo[4] == pytest.approx(values.sum())  # num, sum
    assert histo[5] == pytest.approx(float((values.astype(np.float64) ** 2).sum()))
    limits, counts = histo[6], histo[7]
    assert sum(counts) == 6 and limits == sorted(limits)
    # Each value lies in a bucket below its limit and at or above the one before (TF's rule).
    for v in values:
        i = next(k for k, limit in enumerate(limits) if v < limit)
        assert counts[i] >= 1 and (i == 0 or v >= limits[i - 1])
    assert summary_values(nested) == {"values": histo}
    # 0.5 twice in one bucket; runs of empty buckets are merged into one each.
    assert max(counts) == 2
    assert all(not (a == 0 and b == 0) for a, b in zip(counts, counts[1:]))


def test_file_writer_writes_event_files_tensorboard_reads(tmp_path):
    x = tf.Variable(2.0, name="x")
    step = tf.assign_add(x, 1.0)
    tf.summary.scalar("x", x)
    merged = tf.summary.merge_all()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        writer = tf.summary.FileWriter(str(tmp_path), sess.graph)
        for i in range(3):
            summary, _ = sess.run([merged, step])
            writer.add_summary(summary, global_step=i)
        writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="accuracy", simple_value=0.75)]), 7)
        writer.flush()
        writer.close()
    files = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    assert len(files) == 1
    records = events(files[0])
    assert records[0][3] == b"brain.Event:2"                         # file_version
    assert any(4 in r for r in records)                              # the graph
    summaries = [(r.get(2, 0), summary_values(r[5])) for r in records if 5 in r]
    steps = [s for s, _ in summaries]
    assert steps == [0, 1, 2, 7]
    # Fetched in the same step as the assign: 2, 3 and 4 at the steps (the read comes first or
    # after the add; either way each step's value is one of those two).
    # The tag is the summary op's unique name, as in TF: "x" is the variable's.
    for (s, v), before in zip(summaries[:3], [2.0, 3.0, 4.0]):
        assert v["x_1"] in (before, before + 1)
    assert summaries[3][1] == {"accuracy": 0.75}


def test_summary_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="needs a scalar"):
        tf.summary.scalar("bad", tf.constant([1.0, 2.0]))
    with pytest.raises(TypeError, match="summaries"):
        tf.summary.merge([tf.constant(1.0)])
    writer = tf.summary.FileWriter(str(tmp_path))
    with pytest.raises(TypeError, match="bytes"):
        writer.add_summary(3.0, 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not a Summary"):
        writer.add_summary(b"\xff\xff\xff", 1)
    writer.close()
    with pytest.raises(RuntimeError, match="closed"):
        writer.add_summary(b"", 1)
    with pytest.raises(AttributeError, match="image"):
        tf.summary.image
    with pytest.raises(tf.errors.OpError):
        tf.summary.FileWriter("/proc/no/such/dir")
