#!/usr/bin/python3
"""The TensorBoard event files actorflow-train writes, read back through the protobuf library.

  tensorboard_events.py ACTORFLOW_TRAIN TENSORBOARD_PROTO

Runs actorflow-train twice (an MLP for its scalars and its placed graph; linear regression
stopped at step 200 and resumed to 400), then reads every event file:
  - the framing: each record's length and data checked against their masked CRC-32C, computed
    here with Debian's python3-crc32c (not actorflow's code);
  - each record parsed as an Event with the message classes protoc makes of
    serialization/tensorboard.proto (Debian's protobuf-compiler and python3-protobuf);
  - what TensorBoard needs: the file version first, the scalars by tag and step, the graph with
    its ops, inputs and devices, and a resumed run's SessionLog START at the step it resumed at.
Exit 0 and "PASSED" when all holds; 1 and what failed otherwise.
"""
import glob
import os
import struct
import subprocess
import sys
import tempfile

import crc32c


def masked(data):
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    offset = 0
    while offset < len(data):
        header = data[offset:offset + 12]
        assert len(header) == 12, "%s: record at byte %d cut short" % (path, offset)
        (length,) = struct.unpack("<Q", header[:8])
        (length_crc,) = struct.unpack("<I", header[8:])
        assert length_crc == masked(header[:8]), "%s: length CRC at byte %d" % (path, offset)
        body = data[offset + 12:offset + 12 + length]
        (body_crc,) = struct.unpack("<I", data[offset + 12 + length:offset + 16 + length])
        assert body_crc == masked(body), "%s: data CRC at byte %d" % (path, offset)
        yield body
        offset += 16 + length


def events(pb, directory):
    files = sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*")))
    out = []
    for path in files:
        parsed = []
        for body in records(path):
            event = pb.Event()
            event.ParseFromString(body)
            parsed.append(event)
        out.append(parsed)
    return out


def scalars(file_events):
    found = {}
    for e in file_events:
        if e.WhichOneof("what") == "summary":
            for v in e.summary.value:
                found.setdefault(v.tag, []).append((e.step, v.simple_value))
    return found


def run(command):
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert done.returncode == 0, "%s exited %d:\n%s" % (" ".join(command), done.returncode, done.stdout[-3000:])


def main():
    train, proto = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="af-tensorboard-")
    try:
        subprocess.run(["protoc", "-I", os.path.dirname(proto), "--python_out", work, proto], check=True)
        sys.path.insert(0, work)
        import tensorboard_pb2 as pb

        # An MLP, one epoch on one device: every scalar but the sync one, and a placed graph.
        mlp = os.path.join(work, "mlp")
        run([train, "--local", "--model", "mlp", "--epochs", "1", "--threads", "1", "--log-every", "100",
             "--output-dir", mlp])
        (only,) = events(pb, mlp)
        assert only[0].file_version == "brain.Event:2", only[0]
        tags = scalars(only)
        for tag in ("loss", "accuracy", "examples_per_second", "step_time_seconds"):
            assert tag in tags, "no '%s' scalars: %s" % (tag, sorted(tags))
        steps = [s for s, _ in tags["loss"]]
        assert steps[0] == 1 and steps[1] == 100 and steps == sorted(steps), steps
        assert tags["loss"][-1][1] < tags["loss"][0][1], tags["loss"]
        assert all(0 <= a <= 1 for _, a in tags["accuracy"]), tags["accuracy"]
        assert "stale_gradients_dropped" not in tags  # not synchronous training
        graphs = [e for e in only if e.WhichOneof("what") == "graph_def"]
        assert len(graphs) == 1, len(graphs)
        graph = pb.GraphDef()
        graph.ParseFromString(graphs[0].graph_def)
        ops = {n.op for n in graph.node}
        assert {"MatMul", "Relu"} <= ops, sorted(ops)
        devices = {n.device for n in graph.node}
        assert any(d.endswith("/device:CPU:0") for d in devices), devices
        names = {n.name for n in graph.node}
        for n in graph.node:
            for i in n.input:
                assert i.lstrip("^").split(":")[0] in names, (n.name, i)
        matmul = next(n for n in graph.node if n.op == "MatMul")
        assert matmul.attr["_output_shapes"].list.shape, matmul

        # Linear regression to step 200 with checkpoints, then resumed to 400: a second file
        # that starts with SessionLog START at 200 and goes on from there.
        linreg = os.path.join(work, "linreg")
        flags = [train, "--model", "linreg", "--log-every", "50", "--output-dir", linreg,
                 "--checkpoint-dir", os.path.join(work, "checkpoints")]
        run(flags + ["--steps", "200"])
        run(flags + ["--steps", "400", "--resume"])
        first, second = events(pb, linreg)
        assert [s for s, _ in scalars(first)["loss"]] == [1, 50, 100, 150, 200], scalars(first)
        assert "accuracy" not in scalars(first), "a regression has no accuracy"  # nor a flat 0
        assert second[0].file_version == "brain.Event:2"
        start = second[1]
        assert start.WhichOneof("what") == "session_log", start
        assert start.session_log.status == pb.SessionLog.START and start.step == 200, start
        assert [s for s, _ in scalars(second)["loss"]] == [250, 300, 350, 400], scalars(second)
        assert scalars(second)["loss"][-1][1] < 1e-3, scalars(second)["loss"]
        print("PASSED: %d + %d + %d records, CRCs and Events checked" % (len(only), len(first), len(second)))
        return 0
    except AssertionError as failure:
        print("FAILED:", failure)
        return 1
    finally:
        subprocess.run(["rm", "-rf", "--", work])


if __name__ == "__main__":
    sys.exit(main())
