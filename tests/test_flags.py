"""The scripts' flags: shared ones defined once, optimizer defaults written
once (in the params dataclasses), every flag read."""
import ast
import dataclasses
import os
import re

from absl import flags

from classification import classifier
from classification import optimization
import script_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = ('train_image_classifier', 'eval_image_classifier', 'export_model',
           'export_inference_graph', 'classify_image')


def _training_flags(*argv):
  values = flags.FlagValues()
  script_flags.define_shared_flags(32, 'train', 'train_image_size', 0, values)
  script_flags.define_training_flags(values)
  values(['train_image_classifier.py'] + list(argv))
  return values


def test_optimizer_flags_are_the_optimizer_params_fields_and_defaults():
  values = _training_flags()
  for field in dataclasses.fields(optimization.OptimizerParams):
    assert values[field.name].default == field.default, field.name
  assert (script_flags.optimizer_params(values) ==
          optimization.OptimizerParams())


def test_given_flags_reach_the_params():
  values = _training_flags('--optimizer=adam', '--adam_beta1=0.5',
                           '--sync_replicas', '--weight_decay=0',
                           '--moving_average_decay=0.99',
                           '--distort_colors_after_batching')
  assert script_flags.optimizer_params(values) == (
      optimization.OptimizerParams(optimizer='adam', adam_beta1=0.5,
                                   sync_replicas=True))
  assert script_flags.params_from_flags(
      classifier.ClassifierParams, flag_values=values) == {
          'weight_decay': 0.0, 'label_smoothing': 0.0,
          'moving_average_decay': 0.99, 'ignore_missing_vars': False,
          'log_every_n_steps': 10, 'async_worker_warmup_steps': 100,
          'distort_colors_after_batching': True}


def test_shared_flags_keep_tf_slims_train_and_eval_defaults():
  train, evaluate = flags.FlagValues(), flags.FlagValues()
  script_flags.define_shared_flags(32, 'train', 'train_image_size', 0, train)
  script_flags.define_shared_flags(100, None, 'eval_image_size', None,
                                   evaluate)
  train(['train']), evaluate(['eval'])
  assert (train.batch_size, train.dataset_split_name) == (32, 'train')
  assert (evaluate.batch_size, evaluate.dataset_split_name) == (100, None)
  assert train.train_image_size is evaluate.eval_image_size is None
  shared = {name: train[name].default for name in train}
  assert dict(shared, eval_image_size=None) == dict(
      {name: evaluate[name].default for name in evaluate},
      batch_size=32, dataset_split_name='train', train_image_size=None,
      labels_offset=0)
  assert (shared['dataset_name'], shared['model_name'], shared['num_readers'],
          shared['labels_offset']) == ('imagenet', 'inception_v3', 4, 0)
  assert evaluate.labels_offset is None  # inferred from the checkpoint


def _defined_flags(source):
  """The flags a script's source defines: its own DEFINE_* calls and the
  script_flags.define_* calls it makes, run on flags of their own."""
  names = set(re.findall(r"DEFINE_\w+\(\s*'(\w+)'", source))
  values = flags.FlagValues()
  for node in ast.walk(ast.parse(source)):
    if (isinstance(node, ast.Call) and
        isinstance(node.func, ast.Attribute) and
        getattr(node.func.value, 'id', None) == 'script_flags' and
        node.func.attr.startswith('define_')):
      node.keywords.append(
          ast.keyword('flag_values', ast.Name('values', ast.Load())))
      call = ast.fix_missing_locations(ast.Expression(node))
      eval(compile(call, 'script', 'eval'),  # pylint: disable=eval-used
           {'script_flags': script_flags, 'values': values})
  # An alias (--input_grayscale) is read through the flag it names.
  aliases = {n for n in values if type(values[n]).__name__ == '_FlagAlias'}
  return (names | set(values)) - aliases


def _generated_reads(source):
  """The flags a script reads through the params dataclasses' fields."""
  read = set()
  for params_class, call in (
      (optimization.OptimizerParams, 'script_flags.optimizer_params('),
      (classifier.ClassifierParams, 'params_from_flags(classifier.'
       'ClassifierParams')):
    if call in source:
      read |= {f.name for f in dataclasses.fields(params_class)
               if 'help' in f.metadata}
  if re.search(r'script_flags\.(network|input)_args\(', source):
    read |= set(script_flags.IMAGE_SIZE_FLAGS)  # whichever the script has
  return read


def test_every_flag_of_every_script_is_read():
  with open(os.path.join(ROOT, 'script_flags.py')) as f:
    shared_source = f.read()
  unread = {}
  for script in SCRIPTS:
    with open(os.path.join(ROOT, script + '.py')) as f:
      source = f.read()
    defined = _defined_flags(source)
    assert len(defined) > 10, script
    generated = _generated_reads(source)
    unread[script] = sorted(
        n for n in defined if n not in generated and not re.search(
            r"\bF(\.%s\b|\['%s'\])" % (n, n), source + shared_source))
  assert unread == {script: [] for script in SCRIPTS}


def test_eval_has_no_master_flag_it_would_not_read():
  with open(os.path.join(ROOT, 'eval_image_classifier.py')) as f:
    assert 'master' not in _defined_flags(f.read())
