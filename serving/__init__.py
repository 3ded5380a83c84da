"""A trained classifier served: exports (SavedModel, TFLite, frozen graph)
and the inference that reads them back."""
import tf_compat  # noqa: F401  (tf-slim on TF 2.21; must precede tf_slim use)
