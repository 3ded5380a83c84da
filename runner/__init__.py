"""The Estimator-compatible runner: model_fn -> EstimatorSpec, trained,
evaluated, predicted and exported on MonitoredTrainingSession."""
import tf_compat  # noqa: F401  (tf-slim on TF 2.21; must precede tf_slim use)
