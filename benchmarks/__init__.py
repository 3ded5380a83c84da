"""Benchmarks: the engine of benchmark_image_classifier.py
(classifier_benchmark) and the ones run as files (input_benchmark,
bf16_peak, cluster_benchmark). Nothing here imports TensorFlow on import, so
a script can import quiet_tensorflow first."""
