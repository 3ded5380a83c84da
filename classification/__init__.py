"""Image classification on the zoo: the model_fn and input_fn, the optimizer
and its schedule, fine-tuning, the scripts' shared flags, and what a run
prints (progress, per-class reports)."""
import tf_compat  # noqa: F401  (tf-slim on TF 2.21; must precede tf_slim use)
