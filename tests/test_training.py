"""The training harness end to end: scripts, fine-tuning, resume, bad input."""
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from classification import classifier
from classification import optimization
from datasets import dataset_factory, dataset_utils
from deployment import model_deploy
from runner import estimator as est
import scripts

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, 'train_image_classifier.py')
EVAL = os.path.join(ROOT, 'eval_image_classifier.py')
LENET_FLAGS = ['--model_name=lenet', '--dataset_name=digits',
               '--optimizer=sgd', '--learning_rate=0.01',
               '--learning_rate_decay_type=fixed', '--weight_decay=0',
               '--batch_size=50', '--random_seed=0']


def run(script, *args, timeout=600):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return scripts.run(script, *args, env=env, timeout=timeout)


def error_line(result):
  lines = [l for l in result.stderr.splitlines() if 'error:' in l]
  assert len(lines) == 1, result.stderr[-3000:]
  return lines[0]


@pytest.mark.slow
def test_digits_end_to_end_reaches_95_percent(digits_dir, tmp_path):
  train_dir = str(tmp_path / 'lenet')
  trained = run(TRAIN, *LENET_FLAGS, '--dataset_dir=' + digits_dir,
                '--train_dir=' + train_dir, '--max_number_of_steps=300',
                '--log_every_n_steps=100')
  assert trained.returncode == 0, trained.stderr[-3000:]
  assert re.search(r'^step \d+/300 \(\d+%\): loss = [\d.]+ \([\d.]+ images/sec; '
                   r'50 images/step\), ETA \w+$', trained.stdout, re.M)
  evaluated = run(EVAL, '--model_name=lenet', '--dataset_name=digits',
                  '--dataset_split_name=validation',
                  '--dataset_dir=' + digits_dir,
                  '--checkpoint_path=' + train_dir)
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  accuracy = float(re.search(r'^Accuracy = ([\d.]+)$', evaluated.stdout,
                             re.M).group(1))
  assert accuracy >= 0.95
  assert re.search(r'^Recall_5 = ([\d.]+)$', evaluated.stdout, re.M)
  assert os.listdir(os.path.join(train_dir, 'eval'))


@pytest.mark.slow
def test_two_clones_take_batch_size_images_each_per_step(digits_dir, tmp_path):
  """TF-Slim's rule: --batch_size is per clone (2 x 8 = 16 images a step)."""
  train_dir = str(tmp_path / 'two')
  flags = [f for f in LENET_FLAGS if not f.startswith('--batch_size')]
  trained = run(TRAIN, *flags, '--dataset_dir=' + digits_dir,
                '--train_dir=' + train_dir, '--max_number_of_steps=3',
                '--num_clones=2', '--clone_on_cpu', '--batch_size=8',
                '--log_every_n_steps=1')
  assert trained.returncode == 0, trained.stderr[-3000:]
  assert est.global_step_of(tf.train.latest_checkpoint(train_dir)) == 3
  steps = re.findall(r'^step (\d+)/3 .*; (\d+) images/step = 2 clones x 8\), '
                     r'ETA \w+$', trained.stdout, re.M)
  assert steps == [('1', '16'), ('2', '16'), ('3', '16')], trained.stdout


@pytest.mark.slow
def test_evaluation_on_seven_devices_equals_one_device(digits_dir, tmp_path):
  """360 images in batches of 7 x 17 = 119: the last batch has 3 images,
  fewer than the devices, and every metric still equals one device's."""
  trained = _estimator(str(tmp_path / 'model'), digits_dir,
                       optimizer=optimization.OptimizerParams(
                           optimizer='sgd', learning_rate=0.01))
  trained.train(_input_fn(digits_dir), max_steps=20)
  outputs = []
  for clones in ('1', '7'):
    evaluated = run(EVAL, '--model_name=lenet', '--dataset_name=digits',
                    '--dataset_split_name=validation',
                    '--dataset_dir=' + digits_dir,
                    '--checkpoint_path=' + str(tmp_path / 'model'),
                    '--eval_dir=' + str(tmp_path / ('eval' + clones)),
                    '--num_clones=' + clones, '--clone_on_cpu',
                    '--batch_size=' + ('119' if clones == '1' else '17'))
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    outputs.append(re.findall(r'^(\w+) = ([\d.]+)$', evaluated.stdout, re.M))
  assert [name for name, _ in outputs[0]] == ['Accuracy', 'Recall_5']
  assert outputs[0] == outputs[1]
  assert 0.3 < float(outputs[0][0][1]) < 1.0


# -- fine-tuning (in process, through the same model_fn) ----------------------
def _estimator(train_dir, digits, **overrides):
  overrides.setdefault('optimizer', optimization.OptimizerParams(
      optimizer='sgd', learning_rate=0.1))
  params = classifier.ClassifierParams(
      model_name='lenet', num_classes=10, num_samples_per_epoch=1437,
      batch_size=16, weight_decay=0.0, log_every_n_steps=1000, **overrides)
  config = est.RunConfig(tf_random_seed=0, log_step_count_steps=None,
                         save_summary_steps=None)
  return est.Estimator(classifier.model_fn, train_dir, config=config,
                       params={'classifier': params})


def _input_fn(digits_dir):
  dataset = dataset_factory.get_dataset('digits', 'train', digits_dir)
  return classifier.make_input_fn(dataset, 'lenet', 16, is_training=True,
                                  deterministic=True, num_readers=1)


def _values(checkpoint):
  return {name: tf.train.load_variable(checkpoint, name)
          for name, _ in tf.train.list_variables(checkpoint)
          if name.startswith('LeNet/')}


def test_fine_tuning_restores_excludes_and_trains_only_trainable_scopes(
    digits_dir, tmp_path):
  source = _estimator(str(tmp_path / 'source'), digits_dir)
  source.train(_input_fn(digits_dir), max_steps=2)
  published = _values(source.latest_checkpoint())

  tuned = _estimator(str(tmp_path / 'tuned'), digits_dir,
                     checkpoint_path=str(tmp_path / 'source'),
                     checkpoint_exclude_scopes=['LeNet/fc4'],
                     trainable_scopes=['LeNet/fc4'])
  tuned.train(_input_fn(digits_dir), max_steps=1)
  first = _values(tuned.latest_checkpoint())
  for name in published:
    if name.startswith('LeNet/fc4'):
      assert not np.array_equal(first[name], published[name]), name
    else:  # restored, and not trainable
      np.testing.assert_array_equal(first[name], published[name], name)

  tuned.train(_input_fn(digits_dir), steps=2)  # resumes from its own step 1
  after = _values(tuned.latest_checkpoint())
  assert est.global_step_of(tuned.latest_checkpoint()) == 3
  changed = sorted(n for n in after if not np.array_equal(after[n], first[n]))
  assert changed == ['LeNet/fc4/biases', 'LeNet/fc4/weights']


def test_fine_tuning_from_a_mismatched_checkpoint_lists_the_culprits(
    digits_dir, tmp_path):
  with tf.Graph().as_default():
    tf1.get_variable('LeNet/conv1/weights', [5, 5, 3, 32])
    tf1.get_variable('LeNet/conv1/biases', [32])
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      tf1.train.Saver().save(sess, str(tmp_path / 'rgb' / 'model.ckpt'))
  tuned = _estimator(str(tmp_path / 'tuned'), digits_dir,
                     checkpoint_path=str(tmp_path / 'rgb'))
  with pytest.raises(ValueError, match=r'does not match the network: 1 '
                     r'variable\(s\) with other shapes, first: LeNet/conv1/'
                     r'weights \[5, 5, 1, 32\] \(checkpoint: \[5, 5, 3, 32\]\)'):
    tuned.train(_input_fn(digits_dir), max_steps=1)
  assert not tf.train.latest_checkpoint(str(tmp_path / 'tuned'))


# -- interruption ---------------------------------------------------------
@pytest.mark.slow
def test_sigkill_leaves_a_loadable_checkpoint_and_the_rerun_resumes(
    digits_dir, tmp_path):
  train_dir = str(tmp_path / 'killed')
  args = LENET_FLAGS + ['--dataset_dir=' + digits_dir,
                        '--train_dir=' + train_dir, '--save_interval_secs=1',
                        '--log_every_n_steps=1000']
  proc = subprocess.Popen([sys.executable, TRAIN] + args +
                          ['--max_number_of_steps=100000'], cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    deadline = time.time() + 300
    while time.time() < deadline:
      latest = tf.train.latest_checkpoint(train_dir)
      if latest and est.global_step_of(latest) > 0:
        break
      time.sleep(0.5)
    time.sleep(1.5)  # let it be mid-way through more steps and saves
  finally:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
  latest = tf.train.latest_checkpoint(train_dir)
  step = est.global_step_of(latest)  # loads: the checkpoint is whole
  assert step > 0
  assert _values(latest)['LeNet/fc4/weights'].shape == (1024, 10)
  resumed = run(TRAIN, *args, '--max_number_of_steps=%d' % (step + 5))
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert 'Resuming from %s (step %d)' % (latest, step) in resumed.stdout
  assert est.global_step_of(tf.train.latest_checkpoint(train_dir)) == step + 5


# -- bad input: one line naming the culprit, non-zero exit --------------------
def _bad_labels_dir(tmp_path):
  path = tmp_path / 'bad_labels'
  path.mkdir()
  png = dataset_utils.encode_png(np.zeros([8, 8, 3], np.uint8))
  with tf.io.TFRecordWriter(
      str(path / 'image_folder_train-00000-of-00001.tfrecord')) as writer:
    for label in (1, 12):
      writer.write(dataset_utils.image_to_tfexample(
          png, b'png', 8, 8, label).SerializeToString())
  dataset_utils.describe_records(str(path), 'image_folder', {'train': [
      str(path / 'image_folder_train-00000-of-00001.tfrecord')]}, 10)
  return str(path)


BAD_INPUTS = {
    'dataset': (['--dataset_name=digitz'],
                r"unknown dataset_name 'digitz'; did you mean 'digits'\? "
                r'\(known: cifar10, digits, flowers'),
    'model': (['--model_name=lenett'],
              r"unknown model_name 'lenett'; did you mean 'lenet'\?"),
    'video_model': (['--model_name=i3d'],
                    r"model_name 'i3d' is a video network: it takes clips "
                    r'\[batch, 64 frames, 224, 224, 3\]'),
    'preprocessing': (['--preprocessing_name=incepton'],
                      r"unknown preprocessing_name 'incepton'"),
    'optimizer': (['--optimizer=adamw'],
                  r"unknown optimizer 'adamw'; did you mean 'adam'\? \(known: "
                  r'adadelta, adagrad, adam, ftrl, momentum, rmsprop, sgd\)'),
    'missing_dir': (['--dataset_dir={tmp}/nowhere'],
                    r"dataset_dir '.*nowhere' does not exist"),
    'no_files': (['--dataset_dir={tmp}'], r'no files match'),
    'clones': (['--num_clones=2'],
               r'num_clones=2 but only 0 GPU\(s\) are available; use '
               r'--clone_on_cpu'),
    'labels': (['--dataset_name=image_folder', '--dataset_dir={bad_labels}'],
               r'label 12 outside \[0, 10\)'),
    'precision': (['--precision=fp16'],
                  r'--precision=fp16 is not one of float32, bfloat16, '
                  r'float16'),
}


@pytest.mark.slow
@pytest.mark.parametrize('case', sorted(BAD_INPUTS))
def test_bad_input_is_one_line_naming_the_culprit(case, digits_dir, tmp_path):
  flags, pattern = BAD_INPUTS[case]
  values = dict(tmp=str(tmp_path), digits=digits_dir,
                bad_labels=_bad_labels_dir(tmp_path) if case == 'labels' else '')
  args = (LENET_FLAGS + ['--dataset_dir=' + digits_dir,
                         '--train_dir=%s/train' % tmp_path,
                         '--max_number_of_steps=5'] +
          [f.format(**values) for f in flags])
  result = run(TRAIN, *args)
  assert result.returncode != 0
  assert re.search(pattern, error_line(result)), error_line(result)
  assert not tf.train.latest_checkpoint(str(tmp_path / 'train')) or case == 'labels'


def test_train_dir_that_is_a_file_is_refused_untouched(digits_dir, tmp_path):
  path = tmp_path / 'a_file'
  path.write_text('precious')
  result = run(TRAIN, *LENET_FLAGS, '--dataset_dir=' + digits_dir,
               '--train_dir=%s' % path, '--max_number_of_steps=1')
  assert result.returncode != 0
  assert re.search(r"--train_dir '.*a_file' is a file", error_line(result))
  assert path.read_text() == 'precious'


# -- optimizers, schedules, moving averages, eval modes -------------------------
@pytest.mark.parametrize('clones', [1, 2])
@pytest.mark.parametrize('optimizer', optimization.OPTIMIZERS)
def test_every_optimizer_takes_a_step(optimizer, clones, digits_dir, tmp_path):
  """The script's optimizers (RMSProp is its default) on 1 and 2 clones:
  slots are made once, under one device's names."""
  estimator = _estimator(
      str(tmp_path), digits_dir,
      optimizer=optimization.OptimizerParams(optimizer=optimizer,
                                             learning_rate=0.01),
      deployment=model_deploy.DeploymentConfig(exact=True, num_clones=clones,
                                               clone_on_cpu=clones > 1))
  estimator.train(_input_fn(digits_dir), max_steps=1)
  checkpoint = estimator.latest_checkpoint()
  assert est.global_step_of(checkpoint) == 1
  names = [name for name, _ in tf.train.list_variables(checkpoint)]
  assert not [n for n in names if 'clone_' in n]
  if optimizer != 'sgd':
    assert [n for n in names if n.startswith('LeNet/fc4/weights/')], names


def test_decay_steps_count_the_images_of_every_clone_and_replica():
  p = classifier.ClassifierParams(
      model_name='lenet', num_classes=10, batch_size=8,
      deployment=model_deploy.DeploymentConfig(exact=True, num_clones=4),
      optimizer=optimization.OptimizerParams(sync_replicas=True,
                                             replicas_to_aggregate=3))
  assert classifier.images_per_step(p) == 8 * 4 * 3
  p.optimizer = optimization.OptimizerParams(
      learning_rate=1.0, learning_rate_decay_factor=0.5,
      num_epochs_per_decay=1.0)  # async: one worker's clones per step
  assert classifier.images_per_step(p) == 32
  with tf.Graph().as_default():
    step = tf1.placeholder(tf.int64, [])
    rate = optimization.configure_learning_rate(
        p.optimizer, 320, classifier.images_per_step(p), step)
    with tf1.Session() as sess:  # an epoch of 320 images is 10 steps
      got = [sess.run(rate, {step: s}) for s in (9, 10, 20)]
  np.testing.assert_allclose(got, [1.0, 0.5, 0.25])


@pytest.mark.parametrize('decay, want', [
    ('fixed', [0.1, 0.1, 0.1]),
    ('exponential', [0.1, 0.1, 0.025]),  # staircase: halves every 10 steps
    ('polynomial', [0.1, 0.0505, 0.001])])  # linear to the end over 10 steps
def test_learning_rate_schedules(decay, want):
  p = optimization.OptimizerParams(learning_rate=0.1, end_learning_rate=0.001,
                                   learning_rate_decay_type=decay,
                                   learning_rate_decay_factor=0.5,
                                   num_epochs_per_decay=1.0)
  with tf.Graph().as_default():
    step = tf1.placeholder(tf.int64, [])
    # 10 images/step
    rate = optimization.configure_learning_rate(p, 100, 10, step)
    with tf1.Session() as sess:
      got = [sess.run(rate, {step: s}) for s in (0, 5, 20)]
  np.testing.assert_allclose(got, want, rtol=1e-5)


def test_moving_averages_are_kept_and_used_for_evaluation(digits_dir, tmp_path):
  trained = _estimator(str(tmp_path), digits_dir, moving_average_decay=0.5)
  trained.train(_input_fn(digits_dir), max_steps=3)
  checkpoint = trained.latest_checkpoint()
  names = dict(tf.train.list_variables(checkpoint))
  assert 'LeNet/fc4/weights/ExponentialMovingAverage' in names
  shadow = tf.train.load_variable(checkpoint,
                                  'LeNet/fc4/weights/ExponentialMovingAverage')
  assert not np.array_equal(shadow, tf.train.load_variable(
      checkpoint, 'LeNet/fc4/weights'))
  dataset = dataset_factory.get_dataset('digits', 'validation', digits_dir)
  eval_in = classifier.make_input_fn(dataset, 'lenet', 120, False,
                                     num_epochs=1, deterministic=True)
  with_averages = trained.evaluate(eval_in)
  plain = _estimator(str(tmp_path), digits_dir).evaluate(eval_in)
  assert with_averages['global_step'] == plain['global_step'] == 3
  assert with_averages['loss'] != pytest.approx(plain['loss'], abs=1e-7)
