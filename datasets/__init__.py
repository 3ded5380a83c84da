"""Datasets: one module per dataset, converters to sharded TFRecords, descriptors, reader.

  digits.py, mnist.py, ...      a dataset: its facts, `convert`, `register_dataset`
  registry.py                   the one table of datasets (DatasetInfo)
  download_and_convert_data.py  sources -> TFRecords + labels.txt + <name>_dataset.json
  dataset_factory.get_dataset   -> Dataset: TF-Slim's slim.dataset.Dataset, and files, sizes
  reader.make_dataset           descriptor -> tf.data.Dataset of (images, labels)
"""
import tf_compat  # noqa: F401  (tf-slim on TF 2.21; must precede tf_slim use)
