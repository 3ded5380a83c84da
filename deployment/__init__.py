"""Multi-device deployment and the Estimator-compatible runner."""
import tf_compat  # noqa: F401  (tf-slim on TF 2.21; must precede tf_slim use)
