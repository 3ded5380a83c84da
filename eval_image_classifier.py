"""Evaluates a trained network (TF-Slim's flags); prints `name = value` lines.

    python eval_image_classifier.py --dataset_name=digits --dataset_dir=data/digits \
        --dataset_split_name=validation --model_name=lenet --checkpoint_path=runs/lenet

--checkpoint_path is a checkpoint file or a directory (its latest checkpoint);
--wait_for_checkpoints evaluates every new checkpoint of the directory once,
until --eval_timeout_secs pass without one, --max_checkpoints are done or a
checkpoint of step --stop_at_step (training's last) is evaluated: run it
beside training to draw the evaluation curve. A checkpoint that cannot be read
is named and skipped (the newest readable one is evaluated); SIGTERM or
SIGINT stop at once with `stopped by SIGTERM; N checkpoint(s) evaluated` and
exit status 128 + the signal's number.
Trained with --moving_average_decay, the network is evaluated with the moving
averages. --num_clones (with --clone_on_cpu for CPU devices) evaluates on
several devices with the same metrics; --batch_size is per clone, as in
training.

While it runs it prints `eval: batch N/total (p%), ETA t` (the first batch,
then every --log_every_n_secs, and the last); then the metrics, the per-class
accuracy and the confusion matrix. Summaries of every metric, at the
checkpoint's global step, and the confusion matrix image go to --eval_dir
(default <checkpoint dir>/eval, where TensorBoard shows them beside the
training curves), with the CSV files confusion_matrix-<step>.csv and
per_class_accuracy-<step>.csv.

--saved_model=<export dir> or --tflite_model=<file or export dir> evaluate an
export of export_model.py instead, with the same metrics, progress and
per-class printing (files only with --eval_dir): its network, input size and
preprocessing are the ones it was exported with, so the accuracy cost of int8
is one command:

    python eval_image_classifier.py --dataset_name=digits --dataset_dir=data/digits \
        --dataset_split_name=validation --tflite_model=exports/lenet_digits/int8

A TFLite model runs with --tflite_kernels: builtin (the default: TFLite's
built-in kernels, no delegate), xnnpack (TFLite's default XNNPACK delegate,
fastest; its int8 rounding is not a microcontroller's) or micro (TensorFlow
Lite Micro's interpreter: the device's numbers); a line before the progress
says which ran (serving/inference.py).
"""
import functools
import math
import os
import signal
import sys

from absl import app
from absl import flags

import quiet_tensorflow  # (first: TensorFlow's noise off the terminal)
import tf_compat  # noqa: F401
import zoo_errors
import tensorflow as tf

from classification import classifier
from classification import eval_report
from classification import fine_tuning
from classification import precise_bn
from classification import progress
from classification import training_record
from datasets import dataset_factory
from deployment import model_deploy
import quantization
from runner import estimator as est
from runner import faults
from serving import exporter
from serving import inference
import script_flags

F = flags.FLAGS

# The split's default is the dataset's (default_split): TF-Slim's 'test'
# exists for few of them.
script_flags.define_shared_flags(batch_size=100, dataset_split_name=None,
                                 image_size_flag='eval_image_size',
                                 labels_offset=None)
flags.DEFINE_integer('max_num_batches', None,
                     'Batches to evaluate (default: the whole split once).')
flags.DEFINE_string('checkpoint_path', '/tmp/tfmodel/',
                    'Checkpoint file or directory of checkpoints.')
flags.DEFINE_string(
    'train_dir', None, 'Training\'s --train_dir, which TF-Slim recipes also '
    'pass here (TF 1 let unknown flags through): --checkpoint_path defaults '
    'to it.')
flags.DEFINE_string('eval_dir', None,
                    'Where summaries and CSV files go (default: '
                    '<checkpoint dir>/eval, beside the training summaries).')
flags.DEFINE_boolean('quantize', False,
                     'whether to use quantized graph or not (TF-Slim\'s flag: '
                     'the eval graph of quantization-aware training; unset, '
                     'taken from the training record).')
flags.DEFINE_boolean('wait_for_checkpoints', False,
                     'Evaluate each new checkpoint of --checkpoint_path.')
flags.DEFINE_integer('eval_interval_secs', 60,
                     'Seconds between polls for a new checkpoint.')
flags.DEFINE_integer('eval_timeout_secs', None,
                     'Stop waiting after this long without a new checkpoint.')
flags.DEFINE_integer('max_checkpoints', None,
                     'With --wait_for_checkpoints: stop after evaluating this '
                     'many checkpoints.')
flags.DEFINE_integer('stop_at_step', None,
                     'With --wait_for_checkpoints: stop after evaluating a '
                     'checkpoint of this global step or later (training\'s '
                     '--max_number_of_steps).')
flags.DEFINE_float('log_every_n_secs', progress.EVERY_SECS,
                   'Seconds between progress lines of an evaluation.')
flags.DEFINE_string('saved_model', None,
                    'Evaluate this SavedModel export instead of a checkpoint.')
flags.DEFINE_string('tflite_model', None,
                    'Evaluate this TFLite model (file or export directory).')
flags.DEFINE_string(
    'tflite_kernels', inference.DEFAULT_TFLITE_KERNELS,
    'What runs --tflite_model: builtin (TFLite\'s built-in kernels, no '
    'delegate), xnnpack (the XNNPACK delegate: fastest, int8 rounded '
    'otherwise than on a microcontroller) or micro (TensorFlow Lite Micro\'s '
    'interpreter: the device\'s numbers).')


@functools.lru_cache(maxsize=None)  # once: the skipped ones named once
def resolve_checkpoint():
  """--checkpoint_path's checkpoint: a file that must be readable, or the
  newest readable one of a directory (naming those skipped)."""
  if tf.io.gfile.isdir(F.checkpoint_path):
    found = faults.newest_readable_checkpoint(F.checkpoint_path,
                                              progress.print_now)
    if found:
      return found
  path = fine_tuning.resolve_checkpoint(F.checkpoint_path)
  problem = faults.checkpoint_problem(path)
  if problem:
    raise ValueError('checkpoint %s is unreadable (%s)' % (path, problem))
  return path


def checkpoints(signals):
  """The checkpoint(s) to evaluate, in order: --checkpoint_path's, or with
  --wait_for_checkpoints each new newest readable one of the directory (the
  caller stops), until a signal arrives."""
  if not F.wait_for_checkpoints:
    yield resolve_checkpoint()
    return
  for path in faults.follow_checkpoints(
      F.checkpoint_path, F.eval_interval_secs, F.eval_timeout_secs,
      stop=lambda: signals.received is not None, report=progress.print_now):
    yield path
    progress.print_now('Waiting for a new checkpoint in %s%s' % (
        F.checkpoint_path, ' (at most %ss)' % F.eval_timeout_secs
        if F.eval_timeout_secs is not None else ''))
  if signals.received is None:
    progress.print_now('No new checkpoint in %s for %ss: done' % (
        F.checkpoint_path, F.eval_timeout_secs))


def first_checkpoint():
  """The checkpoint an unset --labels_offset is inferred from: the one of
  --checkpoint_path, or the latest of the directory followed (None before
  training has written one)."""
  if F.wait_for_checkpoints:
    if not tf.io.gfile.isdir(F.checkpoint_path):
      return None
    try:
      return faults.newest_readable_checkpoint(F.checkpoint_path)
    except faults.NoReadableCheckpoint:
      return None  # named when followed
  return resolve_checkpoint()


def check_follow_flags():
  """--wait_for_checkpoints' flags, before anything is built."""
  if not F.wait_for_checkpoints:
    return
  # A directory that is not there yet is waited for: the evaluator may start
  # before training has written anything.
  if (tf.io.gfile.exists(F.checkpoint_path) and
      not tf.io.gfile.isdir(F.checkpoint_path)):
    raise ValueError("--wait_for_checkpoints follows a directory; "
                     "--checkpoint_path '%s' is a file" % F.checkpoint_path)
  if F.max_checkpoints is not None and F.max_checkpoints < 1:
    raise ValueError('--max_checkpoints must be at least 1, got %d' %
                     F.max_checkpoints)


def done_waiting(evaluated, step):
  """Whether --wait_for_checkpoints stops after `evaluated` evaluations, the
  last of a checkpoint of global step `step`."""
  return ((F.max_checkpoints is not None and evaluated >= F.max_checkpoints)
          or (F.stop_at_step is not None and step >= F.stop_at_step))


def checkpoint_dir():
  """--checkpoint_path when it is a directory or is followed as one (it may
  not exist yet), else the directory of the checkpoint file."""
  if F.wait_for_checkpoints or tf.io.gfile.isdir(F.checkpoint_path):
    return F.checkpoint_path
  return os.path.dirname(F.checkpoint_path) or '.'


def default_split(dataset_name):
  """TF-Slim's evaluation split 'test' where the dataset has one, else
  'validation'."""
  splits = dataset_factory.get_info(dataset_name).splits or {}
  return 'test' if 'test' in splits else 'validation'


def report(results, dataset, eval_dir):
  """Prints the `name = value` lines and the per-class results; with an
  eval_dir, writes the CSV files and the confusion matrix image there."""
  step = results['global_step']
  print('Evaluated %s%s on %s/%s' % (
      results['checkpoint'], '' if step is None else ' (step %d)' % step,
      F.dataset_name, F.dataset_split_name))
  for name in sorted(results):
    if name not in ('global_step', 'loss', 'checkpoint') and (
        getattr(results[name], 'ndim', 0) == 0):
      print('%s = %.4f' % (name, results[name]))
  classes = eval_report.ClassReport.from_dataset(
      results['confusion_matrix'], dataset.labels_to_names, F.labels_offset)
  paths = ()
  if eval_dir:
    paths = eval_report.write(classes, eval_dir, int(step or 0),
                              accuracy=results.get('Accuracy'))
  print(classes.table(paths))
  sys.stdout.flush()


def records_of_training(record):
  """A --dataset_dir that holds checkpoints rather than records (TF Lite
  Micro's person-detection recipe passes its train_dir) becomes the dataset
  the checkpoints were trained on, with one line."""
  if (not record or not record.get('dataset_dir') or not F.dataset_dir or
      record.get('dataset_name') != F.dataset_name or
      os.path.abspath(F.dataset_dir) == record['dataset_dir'] or
      not (tf.train.get_checkpoint_state(F.dataset_dir) or os.path.exists(
          training_record.path_for(F.dataset_dir)))):
    return
  print('--dataset_dir=%s holds checkpoints, not records: evaluating on %s, '
        'the %s records they were trained on' % (
            F.dataset_dir, record['dataset_dir'], F.dataset_name), flush=True)
  F.dataset_dir = record['dataset_dir']


def check_eval_dir(eval_dir):
  if eval_dir and os.path.exists(eval_dir) and not os.path.isdir(eval_dir):
    raise ValueError("--eval_dir '%s' is a file, not a directory" % eval_dir)


def evaluate_export(dataset):
  """--saved_model or --tflite_model on the dataset, printed as a checkpoint's
  evaluation is."""
  if F.saved_model and F.tflite_model:
    raise ValueError('pass one of --saved_model and --tflite_model')
  if F['tflite_kernels'].present and not F.tflite_model:
    raise ValueError('--tflite_kernels applies to --tflite_model, not to '
                     '--saved_model')
  for flag in ('checkpoint_path', 'wait_for_checkpoints', 'num_clones',
               'moving_average_decay', 'quantize'):
    if F[flag].present:
      raise ValueError('--%s applies to checkpoints, not to --%s' % (
          flag, 'saved_model' if F.saved_model else 'tflite_model'))
  check_eval_dir(F.eval_dir)
  model = quiet_tensorflow.quiet_native(  # TFLite's XNNPACK line
      inference.open_model,
      saved_model=F.saved_model, tflite_model=F.tflite_model,
      spec_from_flags=lambda: exporter.make_spec(
          **script_flags.network_args()),
      tflite_kernels=F.tflite_kernels)
  if F.tflite_model:
    print(model.kernels_line(), flush=True)
  if F.labels_offset is None:
    F.labels_offset = model.spec.labels_offset  # the export's own
  try:
    explicit = {field: (flag, F[flag].value) for field, flag in (
        ('model_name', 'model_name'), ('image_size', 'eval_image_size'),
        ('preprocessing_name', 'preprocessing_name'),
        ('use_grayscale', 'use_grayscale')) if F[flag].present}
    inference.check_flags_agree(model.spec, model.path, **explicit)
    batches = F.max_num_batches or math.ceil(dataset.num_samples /
                                              F.batch_size)
    results = inference.evaluate(
        model, dataset, F.batch_size, labels_offset=F.labels_offset,
        max_num_batches=F.max_num_batches, num_readers=F.num_readers,
        num_preprocessing_threads=F.num_preprocessing_threads,
        progress=progress.EvaluationProgress(batches, F.log_every_n_secs))
  finally:
    model.close()
  del results['images']
  report(dict(results, checkpoint=model.path, global_step=model.global_step),
         dataset, F.eval_dir)


class Interrupted(Exception):
  pass


class StopOnSignalHook(tf.compat.v1.train.SessionRunHook):
  """Abandons an evaluation after the batch in flight once a signal came:
  raising, so that no summary of a partial evaluation is written."""

  def __init__(self, signals):
    self._signals = signals

  def after_run(self, run_context, run_values):
    if self._signals.received is not None:
      raise Interrupted()


def main(_):
  tf.compat.v1.disable_eager_execution()  # a TF 1 program: graph mode
  try:
    exported = F.saved_model or F.tflite_model
    inference.check_tflite_kernels(F.tflite_kernels)
    if F['tflite_kernels'].present and not exported:
      raise ValueError('--tflite_kernels applies to --tflite_model, not to '
                       'checkpoints')
    if F.train_dir and not F['checkpoint_path'].present:
      F.checkpoint_path = F.train_dir
    script_flags.expand_paths('checkpoint_path', 'eval_dir', 'dataset_dir',
                              'saved_model', 'tflite_model')
    if not exported:
      record = script_flags.apply_training_record(F.checkpoint_path)
      records_of_training(record)
      classifier.image_network_info(F.model_name)
    script_flags.check_flags(required=['dataset_dir'],
                             at_least_one=['batch_size'])
    if F.dataset_split_name is None:
      F.dataset_split_name = default_split(F.dataset_name)
    dataset = dataset_factory.get_dataset(F.dataset_name, F.dataset_split_name,
                                          F.dataset_dir)
    dataset.check_files()  # before anything starts: the records are sound
    if exported:
      evaluate_export(dataset)
      return 0
    check_follow_flags()
    if F.quantize and first_checkpoint():
      quantization.check_checkpoint(first_checkpoint())
    script_flags.resolve_labels_offset(first_checkpoint(), dataset.num_classes)
    deployment = model_deploy.DeploymentConfig(num_clones=F.num_clones,
                                               clone_on_cpu=F.clone_on_cpu,
                                               exact=True)
    deployment.check_devices_available()
    params = classifier.ClassifierParams(
        model_name=F.model_name,
        num_classes=dataset.num_classes - F.labels_offset,
        batch_size=F.batch_size, moving_average_decay=F.moving_average_decay,
        deployment=deployment, quantize=F.quantize)
    batch = F.batch_size * F.num_clones
    input_fn = classifier.make_input_fn(
        dataset, F.model_name, batch, is_training=False, num_epochs=1,
        deterministic=True, **script_flags.input_args())
    steps = F.max_num_batches or math.ceil(dataset.num_samples / batch)
    eval_dir = F.eval_dir or os.path.join(checkpoint_dir(), 'eval')
    check_eval_dir(eval_dir)
    estimator = est.Estimator(
        classifier.model_fn, checkpoint_dir(),
        config=est.RunConfig(
            log_step_count_steps=None,
            session_config=script_flags.session_config()),
        params={'classifier': params})
    evaluated = 0
    with faults.StopSignals() as signals:
      for checkpoint in checkpoints(signals):
        try:
          results = estimator.evaluate(
              input_fn, steps=steps, checkpoint_path=checkpoint,
              summary_dir=eval_dir,
              hooks=[fine_tuning.CheckpointFitHook(
                  checkpoint, num_classes=params.num_classes,
                  image_size=(F.eval_image_size or classifier.image_network_info(
                      F.model_name).default_image_size),
                  size_flag='--eval_image_size'),
                     progress.EvaluationProgressHook(steps, F.log_every_n_secs),
                     StopOnSignalHook(signals)])
        except (ValueError, tf.errors.NotFoundError):  # before / while restoring
          if not F.wait_for_checkpoints or est.checkpoint_exists(checkpoint):
            raise
          progress.print_now(est.DELETED_CHECKPOINT % checkpoint)
          continue
        except Interrupted:
          break  # an evaluation cut short is not reported
        step = int(results['global_step'])
        unsettled = precise_bn.unsettled_line(
            checkpoint, training_record.read(checkpoint)[0],
            F.moving_average_decay)
        if unsettled:  # beside the numbers it puts in doubt
          print('eval_image_classifier: warning: %s' % unsettled,
                file=sys.stderr, flush=True)
        report(dict(results, checkpoint=checkpoint, global_step=step),
               dataset, eval_dir)
        evaluated += 1
        if F.wait_for_checkpoints and done_waiting(evaluated, step):
          break
    if signals.received is not None:
      progress.print_now('stopped by %s; %d checkpoint(s) evaluated' % (
          signal.Signals(signals.received).name, evaluated))
      return 128 + signals.received
  except (ValueError, tf.errors.OpError) as e:
    print('eval_image_classifier: error: %s' % zoo_errors.one_line(e),
          file=sys.stderr)
    return zoo_errors.exit_status(e)
  return zoo_errors.DONE


if __name__ == '__main__':
  script_flags.use_grouped_help()
  app.run(lambda argv: sys.exit(main(argv)))
