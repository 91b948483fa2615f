"""TF1's word2vec_basic.py, in its own style, over a small corpus made here: skip-gram pairs,
an embedding table looked up with tf.nn.embedding_lookup, tf.nn.nce_loss over sampled
classes, plain SGD; the only change to a TensorFlow script is the import line.

The corpus has two topics of 20 words each; a sentence draws its words from one topic, so
words of one topic share contexts. Prints the mean cosine similarity of trained embeddings
within a topic and across topics:  "within 0.xx across 0.xx".
"""
import sys

import numpy as np

import actorflow.compat.v1 as tf

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
vocabulary_size = 40
rng = np.random.RandomState(7)
words = []
for _ in range(3000):
    topic = rng.randint(2)
    words.extend(topic * 20 + rng.randint(20, size=6))

batch_size, embedding_size, skip_window, num_sampled = 64, 16, 2, 8


def generate_batch():
    centers = rng.randint(skip_window, len(words) - skip_window, size=batch_size)
    offsets = rng.choice([o for o in range(-skip_window, skip_window + 1) if o != 0], size=batch_size)
    batch = np.array([words[c] for c in centers], dtype=np.int32)
    labels = np.array([[words[c + o]] for c, o in zip(centers, offsets)], dtype=np.int64)
    return batch, labels


graph = tf.Graph()
with graph.as_default():
    train_inputs = tf.placeholder(tf.int32, shape=[batch_size])
    train_labels = tf.placeholder(tf.int64, shape=[batch_size, 1])
    embeddings = tf.Variable(tf.random_uniform([vocabulary_size, embedding_size], -1.0, 1.0, seed=1))
    embed = tf.nn.embedding_lookup(embeddings, train_inputs)
    nce_weights = tf.Variable(tf.truncated_normal([vocabulary_size, embedding_size],
                                                  stddev=1.0 / np.sqrt(embedding_size), seed=2))
    nce_biases = tf.Variable(tf.zeros([vocabulary_size]))
    loss = tf.reduce_mean(tf.nn.nce_loss(weights=nce_weights, biases=nce_biases,
                                         labels=train_labels, inputs=embed,
                                         num_sampled=num_sampled, num_classes=vocabulary_size,
                                         seed=3))
    optimizer = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    norm = tf.sqrt(tf.reduce_sum(tf.square(embeddings), 1, keepdims=True))
    normalized_embeddings = embeddings / norm
    init = tf.global_variables_initializer()

with tf.Session(graph=graph) as session:
    init.run()
    first = None
    for step in range(steps):
        batch_inputs, batch_labels = generate_batch()
        _, loss_val = session.run([optimizer, loss],
                                  feed_dict={train_inputs: batch_inputs, train_labels: batch_labels})
        if first is None:
            first = loss_val
    final_embeddings = normalized_embeddings.eval()

similarity = final_embeddings @ final_embeddings.T
topic = np.arange(vocabulary_size) // 20
same = topic[:, None] == topic[None, :]
off_diagonal = ~np.eye(vocabulary_size, dtype=bool)
print("loss first %.3f last %.3f" % (first, loss_val))
print("within %.3f across %.3f" % (similarity[same & off_diagonal].mean(), similarity[~same].mean()))
