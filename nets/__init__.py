"""Network families, one module each; every module registers its networks."""
import tf_compat  # noqa: F401  (tf-slim on TF 2.21; must precede tf_slim use)
