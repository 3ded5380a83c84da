"""NASNet-A and PNASNet: the cells (`nasnet_utils`), `nasnet` and `pnasnet`,
at TF-Slim's paths."""
import tf_compat  # noqa: F401
