"""tf.distribute: the cluster resolvers (cluster_resolver.TFConfigClusterResolver)."""

from actorflow.distribute import cluster_resolver  # noqa: F401
