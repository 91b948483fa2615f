"""actorflow.compat: `import actorflow.compat.v1 as tf` for TF 1.x programs."""
