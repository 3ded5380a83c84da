"""The Estimator-compatible runner: model_fn -> EstimatorSpec, trained,
evaluated, predicted and exported on MonitoredTrainingSession, and
replicate_model_fn (one device's model_fn on N devices)."""
import tf_compat  # noqa: F401  (tf-slim on TF 2.21; must precede tf_slim use)
