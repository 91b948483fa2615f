"""A ps task as TF1's how-to starts one: tf.train.Server(...).join().
    ps_server.py '{"ps": [...], "worker": [...]}' TASK"""

import json
import sys

import actorflow.compat.v1 as tf

cluster = tf.train.ClusterSpec(json.loads(sys.argv[1]))
server = tf.train.Server(cluster, job_name="ps", task_index=int(sys.argv[2]))
server.join()
