"""Datasets: converters to sharded TFRecords, descriptors of converted splits, reader.

  download_and_convert_data.py  sources -> TFRecords + labels.txt + splits.json
  dataset_factory.get_dataset   -> DatasetDescriptor (pattern, sizes, decoder)
  reader.make_dataset           descriptor -> tf.data.Dataset of (images, labels)
"""
import tf_compat  # noqa: F401  (tf-slim on TF 2.21; must precede tf_slim use)
