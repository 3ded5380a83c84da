"""Where a model runs: clones and their placement, clusters, their launch,
and session settings."""
import tf_compat  # noqa: F401  (tf-slim on TF 2.21; must precede tf_slim use)
