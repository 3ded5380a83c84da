"""Multi-device deployment: clones and their placement, replicated
model_fns, clusters, and exports of a trained model."""
import tf_compat  # noqa: F401  (tf-slim on TF 2.21; must precede tf_slim use)
