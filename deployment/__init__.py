"""Where a model runs: clones and their placement, clusters, their launch,
and session settings.

The package imports no TensorFlow itself: the launcher (launch, warm_start)
and slurm start and watch processes, and the launcher's output and start-up
are its own. The modules that build graphs import tf_compat first
themselves."""
