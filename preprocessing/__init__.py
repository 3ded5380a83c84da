"""Image preprocessing per network family: `preprocessing_factory.get_preprocessing`."""
import tf_compat  # noqa: F401  (graph mode on TF 2.21; must precede tf_slim use)
