"""MobileNet v2, v3 and EdgeTPU: the shared builder (`mobilenet`), its blocks
(`conv_blocks`) and one module per version, at TF-Slim's paths."""
import tf_compat  # noqa: F401
