"""One worker of a classic between-graph script with tf.train.Supervisor: its own graph, the
variables on the ps task (replica_device_setter), managed_session on its own server; the chief
(task 0) initialises and checkpoints into --logdir, the other waits for it.
    supervisor_worker.py --cluster JSON --task N --steps S --logdir D
Logs the supervisor's lines (INFO) to standard error; prints one JSON line: the task, the w it
first read, the global step at the end, and its first and last losses."""

import argparse
import json
import logging

import numpy as np

import actorflow.compat.v1 as tf

logging.basicConfig(level=logging.INFO, format="%(message)s")
parser = argparse.ArgumentParser()
parser.add_argument("--cluster", required=True)
parser.add_argument("--task", type=int, required=True)
parser.add_argument("--steps", type=int, default=50)
parser.add_argument("--logdir", required=True)
args = parser.parse_args()

cluster = tf.train.ClusterSpec(json.loads(args.cluster))
me = "/job:worker/task:%d" % args.task
server = tf.train.Server(cluster, job_name="worker", task_index=args.task,
                         config=tf.ConfigProto(device_filters=["/job:ps", me]))

with tf.device(tf.train.replica_device_setter(worker_device=me, cluster=cluster)):
    x = tf.placeholder(tf.float32, [None], name="x")
    y = tf.placeholder(tf.float32, [None], name="y")
    w = tf.Variable(0.25, name="w")
    b = tf.Variable(0.0, name="b")
    loss = tf.reduce_mean(tf.square(w * x + b - y), name="loss")
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)

sv = tf.train.Supervisor(is_chief=args.task == 0, logdir=args.logdir, global_step=global_step,
                         init_op=tf.global_variables_initializer(), recovery_wait_secs=0.2,
                         save_model_secs=0)
random = np.random.RandomState(7 + args.task)
losses = []
with sv.managed_session(server.target) as sess:
    first_w = float(sess.run(w))
    while not sv.should_stop() and len(losses) < args.steps:
        xs = random.rand(16).astype(np.float32)
        _, value = sess.run([train_op, loss], feed_dict={x: xs, y: 2.0 * xs + 1.0})
        losses.append(float(value))
    final_step = int(sess.run(global_step))
print(json.dumps({"task": args.task, "first_w": first_w, "global_step": final_step,
                  "first_loss": losses[0], "last_loss": losses[-1]}), flush=True)
server.stop()
