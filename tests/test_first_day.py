"""A TF-Slim user's first day, through the scripts as they run them: sizes that
follow the checkpoint (its training record), fine-tuning that says what it
did, and output that tells the truth (one model's loss in every layout, no
deprecation blocks, --help with every flag, runs that say why they do
nothing)."""
import json
import os
import re

import numpy as np
import pytest
from PIL import Image

from classification import optimization
from classification import training_record
from datasets import converters
import scripts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASSES = ('zero', 'one', 'two')
SIZE = 64
FAST = ['--optimizer=sgd', '--learning_rate=0.05',
        '--learning_rate_decay_type=fixed', '--save_summaries_steps=1000']


def run(script, *args, timeout=300):
  # The scripts' own defaults decide what reaches the terminal.
  env = dict(os.environ)
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)
  return scripts.run(script, *args, env=env, timeout=timeout)


def ok(result):
  """The stdout of a run that succeeded without a deprecation notice."""
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  no_deprecation_notices(result)
  return result.stdout


def error_line(result):
  assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-3000:]
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1, result.stderr[-3000:]
  return lines[0]


def no_deprecation_notices(result):
  text = result.stdout + result.stderr
  assert 'deprecat' not in text.lower(), text[-3000:]


@pytest.fixture(scope='module')
def folder64(tmp_path_factory):
  """A folder of 64-px JPEGs (real handwritten digits 0-2, scaled up and
  coloured), converted by the image_folder converter."""
  from sklearn.datasets import load_digits  # pylint: disable=import-outside-toplevel
  root = tmp_path_factory.mktemp('folder64')
  digits = load_digits()
  counts = dict.fromkeys(range(len(CLASSES)), 0)
  for image, label in zip(digits.images, digits.target):
    if label not in counts or counts[label] == 40:
      continue
    gray = np.round(image * 255 / 16).astype(np.uint8)
    rgb = np.stack([gray, 255 - gray, gray // 2], -1)
    path = root / 'photos' / CLASSES[label] / ('%02d.jpg' % counts[label])
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rgb).resize((SIZE, SIZE), Image.BILINEAR).save(
        path, quality=90)
    counts[label] += 1
  converters.convert('image_folder', str(root / 'records'),
                     source_dir=str(root / 'photos'),
                     stream=open(os.devnull, 'w'))
  return root


@pytest.fixture(scope='module')
def cifarnet64(folder64):
  """cifarnet trained at --train_image_size=64 on the folder."""
  train_dir = str(folder64 / 'cifarnet64')
  out = ok(run('train_image_classifier.py', '--model_name=cifarnet',
               '--dataset_name=image_folder',
               '--dataset_dir=' + str(folder64 / 'records'),
               '--train_dir=' + train_dir, '--train_image_size=64',
               '--max_number_of_steps=30', '--batch_size=16',
               '--log_every_n_steps=30', *FAST))
  assert re.search(r'^step 30/30 \(100%\): loss = [\d.]+ \([\d.]+ images/sec '
                   r'incl\. the final summaries; 16 images/step\), ETA 0s$',
                   out, re.M), out
  return train_dir


# -- 3. the checkpoint remembers how it was trained ----------------------------
@pytest.mark.slow
def test_the_train_dir_records_how_the_checkpoint_was_trained(folder64,
                                                              cifarnet64):
  with open(os.path.join(cifarnet64, training_record.FILENAME)) as f:
    assert json.load(f) == {
        'model_name': 'cifarnet', 'image_size': 64,
        'preprocessing_name': 'cifarnet', 'use_grayscale': False,
        'num_classes': 3, 'labels_offset': 0, 'dataset_name': 'image_folder',
        'dataset_dir': str(folder64 / 'records'),
        # What says how settled its batch-norm statistics are: CifarNet has
        # no batch norm, and the run kept no moving averages.
        'batch_norm_decay': None, 'moving_average_decay': None,
        # Trained in float (no --quantize_delay).
        'quantize_delay': None}


@pytest.mark.slow
def test_eval_without_flags_evaluates_at_the_trained_size(cifarnet64):
  out = ok(run('eval_image_classifier.py', '--checkpoint_path=' + cifarnet64))
  assert out.splitlines()[0] == (
      'As trained (%s/training.json): --model_name=cifarnet '
      '--eval_image_size=64 --dataset_name=image_folder --dataset_dir=%s' % (
          cifarnet64, os.path.join(os.path.dirname(cifarnet64), 'records')))
  # image_folder has no 'test': TF-Slim's default split falls back.
  assert re.search(r'^Evaluated .* on image_folder/validation$', out, re.M)
  names = re.findall(r'^(\w+) = [\d.]+$', out, re.M)
  assert names == ['Accuracy']  # no Recall_5 of 3 classes: always 1


@pytest.mark.slow
def test_a_size_that_cannot_fit_is_one_line_naming_the_size(cifarnet64):
  line = error_line(run('eval_image_classifier.py',
                        '--checkpoint_path=' + cifarnet64,
                        '--eval_image_size=32'))
  assert re.fullmatch(
      r"eval_image_classifier: error: --eval_image_size=32 does not fit "
      r"checkpoint '.*model\.ckpt-30': CifarNet/fc3/weights is \[16384, 384\] "
      r"there, \[4096, 384\] here; it was trained at 64 \(its "
      r"training\.json\)", line), line


@pytest.mark.slow
def test_classify_names_the_size_flag_too(folder64, cifarnet64):
  line = error_line(run('classify_image.py', '--checkpoint_path=' + cifarnet64,
                        '--image_size=32',
                        str(folder64 / 'photos' / 'one' / '00.jpg')))
  assert re.fullmatch(r"classify_image: error: --image_size=32 does not fit "
                      r"checkpoint '.*': CifarNet/fc3/weights is \[16384, 384\] "
                      r"there, \[4096, 384\] here; it was trained at 64 .*",
                      line), line


@pytest.mark.slow
def test_a_flag_against_the_record_is_one_line_naming_both(cifarnet64):
  line = error_line(run('export_model.py', '--checkpoint_path=' + cifarnet64,
                        '--model_name=lenet',
                        '--export_dir=' + cifarnet64 + '_unused'))
  assert line == (
      'export_model: error: --model_name=lenet disagrees with the checkpoint: '
      '%s says it is a cifarnet; drop the flag (or pass another '
      '--checkpoint_path)' % os.path.join(cifarnet64, 'training.json'))
  assert not os.path.exists(cifarnet64 + '_unused')


@pytest.mark.slow
def test_exports_and_classify_follow_the_record(folder64, cifarnet64):
  out = ok(run('export_inference_graph.py', '--checkpoint_path=' + cifarnet64,
               '--output_file=' + str(folder64 / 'frozen.pb')))
  assert 'Wrote the frozen graph of cifarnet' in out
  assert "input input ['?', 64, 64, 3] float32" in out, out
  out = ok(run('export_model.py', '--checkpoint_path=' + cifarnet64,
               '--export_dir=' + str(folder64 / 'saved_model')))
  with open(folder64 / 'saved_model' / 'assets.extra' / 'export.json') as f:
    spec = json.load(f)
  assert (spec['model_name'], spec['image_size'], spec['label_names']) == (
      'cifarnet', 64, sorted(CLASSES))  # the converter's order: by name
  image = str(folder64 / 'photos' / 'two' / '00.jpg')
  out = ok(run('classify_image.py', '--checkpoint_path=' + cifarnet64, image))
  rows = re.findall(r'^  ([\d.]+)  (\w+)$', out, re.M)
  assert sorted(name for _, name in rows) == sorted(CLASSES)


@pytest.mark.slow
def test_a_resumed_run_that_does_not_fit_keeps_the_record(folder64,
                                                          cifarnet64):
  record = os.path.join(cifarnet64, training_record.FILENAME)
  with open(record) as f:
    before = f.read()
  line = error_line(run('train_image_classifier.py', '--model_name=cifarnet',
                        '--dataset_name=image_folder',
                        '--dataset_dir=' + str(folder64 / 'records'),
                        '--train_dir=' + cifarnet64, '--batch_size=16',
                        '--max_number_of_steps=40', *FAST))
  assert re.fullmatch(r'train_image_classifier: error: --train_image_size=32 '
                      r'does not fit .*; it was trained at 64 .*', line), line
  with open(record) as f:
    assert f.read() == before


# -- 4. fine-tuning says what it restored, excluded and trains -----------------
@pytest.mark.slow
def test_fine_tuning_prints_what_it_restores_excludes_and_trains(
    folder64, cifarnet64):
  out = ok(run('train_image_classifier.py', '--model_name=cifarnet',
               '--dataset_name=image_folder',
               '--dataset_dir=' + str(folder64 / 'records'),
               '--train_dir=' + str(folder64 / 'tuned'),
               '--train_image_size=64', '--checkpoint_path=' + cifarnet64,
               '--checkpoint_exclude_scopes=CifarNet/logits',
               '--trainable_scopes=CifarNet/fc4,CifarNet/logits',
               '--max_number_of_steps=2', '--batch_size=8', *FAST))
  lines = out.splitlines()
  assert ('Training 4 of 10 variables: 4 variables of CifarNet/fc4, '
          'CifarNet/logits (--trainable_scopes=CifarNet/fc4,CifarNet/logits)'
          in lines), out
  assert ('Fine-tuning from %s/model.ckpt-30: restored 8 variables of '
          'CifarNet/conv1, CifarNet/conv2, CifarNet/fc3, CifarNet/fc4'
          % cifarnet64 in lines), out
  assert ('Not restored: 2 variables of CifarNet/logits '
          '(--checkpoint_exclude_scopes=CifarNet/logits)' in lines), out


# -- 5. output that tells the truth ---------------------------------------------
def _first_loss(out):
  return float(re.search(r'^step 1/1 \(100%\): loss = ([\d.]+) ', out,
                         re.M).group(1))


@pytest.mark.slow
def test_the_printed_loss_is_one_models_in_every_layout(digits_dir, tmp_path):
  """With weight decay, replicated clones print the loss parameter-server
  clones print for the same weights (regularization counted once), and
  say how a step's batch is shared; neither prints a deprecation block.
  Run again, training says it has nothing to do (and warns of Adam's
  epsilon, from the flags it checks first)."""
  outputs, args = {}, {}
  for update in ('parameter_server', 'replicated'):
    args[update] = ['--model_name=lenet', '--dataset_name=digits',
                    '--dataset_dir=' + digits_dir,
                    '--train_dir=' + str(tmp_path / update),
                    '--max_number_of_steps=1', '--batch_size=16',
                    '--num_clones=2', '--clone_on_cpu', '--weight_decay=0.01',
                    '--variable_update=' + update, '--random_seed=1',
                    '--log_every_n_steps=1'] + FAST
    outputs[update] = ok(run('train_image_classifier.py', *args[update]))
    assert re.search(r'; 32 images/step = 2 clones x 16\), ETA 0s$',
                     outputs[update], re.M), outputs[update]
  assert _first_loss(outputs['replicated']) == pytest.approx(
      _first_loss(outputs['parameter_server']), rel=1e-5)

  again = run('train_image_classifier.py', *args['parameter_server'],
              '--optimizer=adam')
  assert ok(again).splitlines() == [
      '%s is already at step 1 (--max_number_of_steps=1): nothing to train; '
      'raise --max_number_of_steps or pass another --train_dir' %
      (tmp_path / 'parameter_server')]
  assert again.stderr.startswith(
      'train_image_classifier: warning: --opt_epsilon=1 is large for '
      '--optimizer=adam: '), again.stderr
  # A bad step count is refused before the checkpoint there is looked at.
  negative = run('train_image_classifier.py', *args['parameter_server'],
                 '--max_number_of_steps=-5')
  assert negative.returncode != 0 and negative.stdout == ''
  assert negative.stderr.strip().splitlines() == [
      'train_image_classifier: error: --max_number_of_steps must be at least '
      '1, got -5']


def test_only_a_large_epsilon_of_adam_or_rmsprop_is_warned():
  warned = [(o, e) for o in optimization.OPTIMIZERS for e in (1.0, 1e-8)
            if optimization.OptimizerParams(optimizer=o,
                                            opt_epsilon=e).warnings()]
  assert warned == [('adam', 1.0), ('rmsprop', 1.0)]


@pytest.mark.slow
def test_a_conversion_rerun_prints_no_deprecation_block(digits_dir):
  result = run('download_and_convert_data.py', '--dataset_name=digits',
               '--dataset_dir=' + digits_dir)
  ok(result)
  assert 'already complete, skipped' in result.stderr


@pytest.mark.parametrize('script, groups, flags', [
    ('train_image_classifier.py',
     ['Network and data', 'Batch and devices', 'Optimizer and learning rate',
      'Training', 'Fine-tuning', 'Cluster'],
     ['dataset_name', 'dataset_dir', 'batch_size', 'learning_rate',
      'optimizer', 'opt_epsilon', 'weight_decay', 'trainable_scopes',
      'train_image_size', 'num_clones', 'sync_replicas']),
    ('eval_image_classifier.py',
     ['Network and data', 'Batch and devices'],
     ['dataset_name', 'dataset_split_name', 'eval_image_size', 'batch_size',
      'moving_average_decay', 'eval_dir', 'wait_for_checkpoints']),
])
def test_help_lists_every_flag_the_script_reads_grouped(script, groups,
                                                        flags):
  result = run(script, '--help')
  found = re.findall(r'^(\S[^:\n]*):$', result.stdout, re.M)
  assert [g for g in found if g in groups] == groups, result.stdout
  listed = set(re.findall(r'^  --(?:\[no\])?(\w+):', result.stdout, re.M))
  assert set(flags) <= listed, sorted(set(flags) - listed)


@pytest.mark.slow
def test_colour_distortion_after_batching_runs_in_each_clone_on_its_device(
    digits_dir, tmp_path):
  """--distort_colors_after_batching: each clone distorts its share of the
  batch on its own device; without the flag no batch distortion exists; a
  preprocessing without it is one line naming the flag and the
  preprocessing, before the train_dir is made."""
  from google.protobuf import text_format  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  common = ['--model_name=lenet', '--dataset_name=digits',
            '--dataset_dir=' + digits_dir, '--max_number_of_steps=20',
            '--batch_size=16', '--num_clones=2', '--clone_on_cpu',
            '--random_seed=1'] + FAST

  def graph(train_dir):
    graph_def = tf.compat.v1.GraphDef()
    with open(os.path.join(train_dir, 'graph.pbtxt')) as f:
      text_format.Merge(f.read(), graph_def)
    return {n.name: n.device for n in graph_def.node}

  moved = str(tmp_path / 'moved')
  ok(run('train_image_classifier.py', *common, '--train_dir=' + moved,
         '--preprocessing_name=inception', '--distort_colors_after_batching'))
  nodes = graph(moved)
  for clone in (0, 1):
    devices = {d for n, d in nodes.items()
               if n.startswith('clone_%d/distort_color_batch/' % clone)}
    assert devices == {'/device:CPU:%d' % clone}, (clone, devices)

  kept = str(tmp_path / 'kept')
  ok(run('train_image_classifier.py', *common, '--train_dir=' + kept,
         '--preprocessing_name=inception'))
  assert not any('distort_color_batch' in n for n in graph(kept))

  refused = str(tmp_path / 'refused')
  assert error_line(run(
      'train_image_classifier.py', *common, '--train_dir=' + refused,
      '--preprocessing_name=vgg', '--distort_colors_after_batching')) == (
          "train_image_classifier: error: --distort_colors_after_batching: "
          "preprocessing 'vgg' is not inception's, the one whose colour "
          "distortion runs on batches")
  assert not os.path.exists(refused)
