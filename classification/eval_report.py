"""What an evaluation tells a person beyond its accuracy: how each class did.

From the confusion matrix the evaluation accumulates (rows: the true class,
columns: the predicted one), this module makes
- a compact table for the terminal (up to MAX_TABLE_CLASSES classes; more are
  summed up by their weakest classes),
- two CSV files: `confusion_matrix-<step>.csv` and
  `per_class_accuracy-<step>.csv`,
- a PNG plot (matplotlib, Agg backend) written to TensorBoard as the image
  `confusion_matrix` at the checkpoint's step.
Labels are the dataset's (labels.txt), also with --labels_offset.
"""
import csv
import io
import os

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1

MAX_TABLE_CLASSES = 20


class ClassReport(object):
  """Per-class results of one evaluation.

  matrix: [n, n] counts, matrix[t, p] = images of class t predicted as p.
  labels: the dataset label of each row (network class + labels_offset).
  names: the label names, '' where unknown.
  """

  def __init__(self, matrix, labels, names):
    self.matrix = np.asarray(matrix, dtype=np.int64)
    if self.matrix.ndim != 2 or self.matrix.shape[0] != self.matrix.shape[1]:
      raise ValueError('confusion matrix must be square, got shape %s' %
                       (self.matrix.shape,))
    if not len(labels) == len(names) == len(self.matrix):
      raise ValueError('%d classes but %d labels and %d names' % (
          len(self.matrix), len(labels), len(names)))
    self.labels, self.names = list(labels), list(names)

  @classmethod
  def from_dataset(cls, matrix, labels_to_names, labels_offset=0):
    labels = [i + labels_offset for i in range(len(matrix))]
    return cls(matrix, labels, [labels_to_names.get(l, '') for l in labels])

  @property
  def images(self):
    return self.matrix.sum(axis=1)

  @property
  def correct(self):
    return np.diag(self.matrix)

  @property
  def accuracy(self):
    """Per class: correct / images; NaN for a class with no image."""
    with np.errstate(invalid='ignore', divide='ignore'):
      return self.correct / self.images

  @property
  def overall_accuracy(self):
    return self.correct.sum() / max(self.matrix.sum(), 1)

  def title(self, i):
    return ('%d %s' % (self.labels[i], self.names[i])).strip()

  # -- terminal ----------------------------------------------------------------
  def table(self, csv_paths=()):
    """The per-class accuracy and confusion rows, or (more than
    MAX_TABLE_CLASSES classes) where they are and the weakest classes."""
    n = len(self.matrix)
    accuracy = self.accuracy
    if n > MAX_TABLE_CLASSES:
      seen = [i for i in range(n) if self.images[i]]
      weakest = sorted(seen, key=lambda i: (accuracy[i], i))[:5]
      lines = ['Per-class accuracy and confusion matrix of %d classes: %s' % (
          n, ', '.join(csv_paths) or 'not written')]
      lines.append('Lowest per-class accuracy: ' + ', '.join(
          '%s %.4f (%d/%d)' % (self.title(i), accuracy[i], self.correct[i],
                               self.images[i]) for i in weakest))
      return '\n'.join(lines)
    names = [self.title(i)[:18] for i in range(n)]
    name_width = max([len('class')] + [len(s) for s in names])
    cell = max(len(str(self.matrix.max())), len(str(max(self.labels)))) + 1
    cell = max(cell, 3)
    header = ('%-*s %6s %8s  ' % (name_width, 'class', 'images', 'accuracy') +
              ''.join('%*d' % (cell, l) for l in self.labels))
    lines = ['Per-class accuracy; confusion matrix (rows: true class, '
             'columns: predicted label):', header]
    for i in range(n):
      row = ''.join('%*s' % (cell, count if count else '.')
                    for count in self.matrix[i])
      shown = '%.4f' % accuracy[i] if self.images[i] else '-'
      lines.append('%-*s %6d %8s  %s' % (name_width, names[i], self.images[i],
                                         shown, row))
    return '\n'.join(lines)

  # -- files ---------------------------------------------------------------------
  def write_csv(self, directory, step):
    """Writes the two CSV files for `step`; returns their paths."""
    os.makedirs(directory, exist_ok=True)
    matrix_path = os.path.join(directory, 'confusion_matrix-%d.csv' % step)
    with open(matrix_path, 'w', newline='') as f:
      writer = csv.writer(f)
      writer.writerow(['true_label', 'true_name'] + self.labels)
      for i in range(len(self.matrix)):
        writer.writerow([self.labels[i], self.names[i]] +
                        self.matrix[i].tolist())
    accuracy_path = os.path.join(directory, 'per_class_accuracy-%d.csv' % step)
    with open(accuracy_path, 'w', newline='') as f:
      writer = csv.writer(f)
      writer.writerow(['label', 'name', 'images', 'correct', 'accuracy'])
      for i in range(len(self.matrix)):
        writer.writerow([self.labels[i], self.names[i], self.images[i],
                         self.correct[i],
                         '%.6f' % self.accuracy[i] if self.images[i] else ''])
    return matrix_path, accuracy_path

  # -- TensorBoard ---------------------------------------------------------------
  def plot_png(self, title=''):
    """The confusion matrix as a PNG (bytes): correct predictions in blue,
    mistakes in red (each shaded by its share of the true class, the red
    scaled to the largest mistake so that small ones still show), counts
    written in when the classes are few, each class's accuracy on the right."""
    # The figure is drawn on an Agg canvas directly: no pyplot, no display.
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=import-outside-toplevel
    from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
    n = len(self.matrix)
    share = self.matrix / np.maximum(self.images, 1)[:, None]
    diagonal = np.eye(n, dtype=bool)
    mistakes = np.where(diagonal, 0.0, share)
    size = 6.4 if n <= MAX_TABLE_CLASSES else 8.0
    figure = Figure(figsize=(size + 1.6, size), dpi=80)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    shown = dict(interpolation='nearest', aspect='auto')
    axes.imshow(np.ma.masked_where(~diagonal | (self.matrix == 0), share),
                cmap='Blues', vmin=0.0, vmax=1.0, **shown)
    axes.imshow(np.ma.masked_where(diagonal | (self.matrix == 0), share),
                cmap='Reds', vmin=0.0, vmax=max(mistakes.max(), 1e-9) * 1.25,
                **shown)
    axes.set_xlim(-0.5, n - 0.5)
    axes.set_ylim(n - 0.5, -0.5)
    if n <= MAX_TABLE_CLASSES:
      for (t, p), count in np.ndenumerate(self.matrix):
        if count:
          dark = share[t, p] > 0.5 if t == p else False
          axes.text(p, t, str(count), ha='center', va='center', fontsize=8,
                    color='white' if dark else 'black')
    if n <= 2 * MAX_TABLE_CLASSES:
      axes.set_xticks(range(n), [str(l) for l in self.labels], fontsize=8)
      axes.set_yticks(range(n), [self.title(i)[:18] for i in range(n)],
                      fontsize=8)
      right = axes.secondary_yaxis('right')
      right.set_yticks(range(n), [
          '%.0f%%' % (100 * a) if count else '-'
          for a, count in zip(self.accuracy, self.images)], fontsize=8)
      right.set_ylabel('accuracy of the class')
    axes.set_xlabel('predicted label')
    axes.set_ylabel('true class')
    axes.set_title(title, fontsize=10)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format='png')
    return buffer.getvalue()

  def image_summary(self, title='', tag='confusion_matrix'):
    png = self.plot_png(title)
    height, width = _png_size(png)
    return tf1.Summary(value=[tf1.Summary.Value(tag=tag, image=tf1.Summary.Image(
        height=height, width=width, colorspace=4, encoded_image_string=png))])


def _png_size(png):
  """(height, width) from a PNG's IHDR chunk."""
  if png[:8] != b'\x89PNG\r\n\x1a\n':
    raise ValueError('not a PNG')
  width, height = int.from_bytes(png[16:20], 'big'), int.from_bytes(png[20:24], 'big')
  return height, width


def write(report, eval_dir, step, accuracy=None):
  """Writes the CSV files and the TensorBoard image for `step` into
  `eval_dir`; returns the CSV paths."""
  paths = report.write_csv(eval_dir, step)
  title = 'step %d: accuracy %.4f (%d/%d); blue: correct, red: mistakes' % (
      step, report.overall_accuracy if accuracy is None else accuracy,
      report.correct.sum(), report.matrix.sum())
  with tf.Graph().as_default():  # a v1 FileWriter refuses eager mode
    writer = tf1.summary.FileWriterCache.get(eval_dir)
  writer.add_summary(report.image_summary(title), step)
  writer.flush()
  return paths


def confusion_matrix_metric(labels, predictions, num_classes,
                            name='confusion_matrix'):
  """A tf.compat.v1.metrics-style (value, update_op) accumulating the
  [num_classes, num_classes] confusion matrix (rows: labels) over batches,
  in a local variable as the other metrics."""
  with tf1.variable_scope(name, default_name='confusion_matrix'):
    total = tf1.get_variable(
        'total', [num_classes, num_classes], tf.int64,
        initializer=tf1.zeros_initializer(), trainable=False,
        collections=[tf1.GraphKeys.LOCAL_VARIABLES,
                     tf1.GraphKeys.METRIC_VARIABLES])
    batch = tf.math.confusion_matrix(labels, predictions, num_classes,
                                     dtype=tf.int64)
    update = tf1.assign_add(total, batch)
    return tf.identity(total, name='value'), update
