"""TF 1.x's names: `import actorflow.compat.v1 as tf` in place of `import tensorflow as tf`.
Every name is the same object as actorflow's own (actorflow.Session is tf.Session)."""

import actorflow as _actorflow
from actorflow import *  # noqa: F401,F403 - this module is that namespace
from actorflow import distribute, errors, layers, losses, math, nn, train  # noqa: F401
from actorflow._missing import missing_names

# `import *` leaves out names starting with "_" and takes only what __all__ would; copy the
# public ones explicitly so that both modules always hold the same objects.
globals().update({k: v for k, v in vars(_actorflow).items()
                  if not k.startswith("_") and k not in ("compat",)})

__getattr__ = missing_names(__name__)
