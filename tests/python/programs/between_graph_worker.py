"""One worker of TF1's between-graph how-to: its own graph, the variables round robin on the ps
tasks (replica_device_setter), MonitoredTrainingSession with StopAtStepHook, the chief
checkpointing; with --sync, SyncReplicasOptimizer rounds of both workers' gradients.
    between_graph_worker.py --cluster JSON --task N --steps S --checkpoint-dir D [--sync]
Prints one JSON line: the task, its global step at the end, its steps, its very first loss, and
its first and last losses (means of five)."""

import argparse
import json

import numpy as np

import actorflow.compat.v1 as tf

parser = argparse.ArgumentParser()
parser.add_argument("--cluster", required=True)
parser.add_argument("--task", type=int, required=True)
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--checkpoint-dir", required=True)
parser.add_argument("--sync", action="store_true")
args = parser.parse_args()

FEATURES = 8
cluster = tf.train.ClusterSpec(json.loads(args.cluster))
me = "/job:worker/task:%d" % args.task
server = tf.train.Server(cluster, job_name="worker", task_index=args.task,
                         config=tf.ConfigProto(device_filters=["/job:ps", me]))

with tf.device(tf.train.replica_device_setter(worker_device=me, cluster=cluster)):
    x = tf.placeholder(tf.float32, [None, FEATURES], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    w = tf.Variable(tf.zeros([FEATURES, 1]), name="w")
    b = tf.Variable(tf.zeros([1]), name="b")
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y), name="loss")
    global_step = tf.train.get_or_create_global_step()
    opt = tf.train.GradientDescentOptimizer(0.1)
    if args.sync:
        opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2, total_num_replicas=2)
    train_op = opt.minimize(loss, global_step=global_step)

class StepRecorder(tf.train.SessionRunHook):
    """A hook in Python beside the C++ ones: the global step each step read."""

    def __init__(self):
        self.steps = []

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(global_step)

    def after_run(self, run_context, run_values):
        self.steps.append(int(run_values.results))


recorder = StepRecorder()
hooks = [tf.train.StopAtStepHook(last_step=args.steps), recorder]
if args.sync:
    # Last here on purpose: the session puts the sync hook first.
    hooks.append(opt.make_session_run_hook(args.task == 0))

# y = x . (1, ..., 8) / 8 + 0.5, each worker its own data.
random = np.random.RandomState(17 + args.task)
coefficients = (np.arange(1, FEATURES + 1, dtype=np.float32) / FEATURES).reshape(FEATURES, 1)


def batch():
    xs = random.uniform(-1, 1, (32, FEATURES)).astype(np.float32)
    return {x: xs, y: xs @ coefficients + 0.5}


losses = []
with tf.train.MonitoredTrainingSession(master=server.target, is_chief=args.task == 0,
                                       checkpoint_dir=args.checkpoint_dir,
                                       save_checkpoint_steps=50, hooks=hooks,
                                       max_wait_secs=60) as sess:
    while not sess.should_stop():
        _, value = sess.run([train_op, loss], feed_dict=batch())
        losses.append(float(value))
print(json.dumps({"task": args.task, "global_step": int(sess.global_step()), "steps": len(losses),
                  "hook_steps": recorder.steps,
                  "initial_loss": losses[0],
                  "first_loss": float(np.mean(losses[:5])),
                  "last_loss": float(np.mean(losses[-5:]))}), flush=True)
server.stop()
