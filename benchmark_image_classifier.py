"""Images/sec of the harness, the bare graph and Keras, side by side.

    python benchmark_image_classifier.py --models=resnet_v1_50,inception_v3,mobilenet_v1 \
        --batch_sizes=32 --rounds=5 --output_json=bench.json

For each model, batch size and clone count, and for training and inference:
  * harness: the real path -- classifier.model_fn on model_deploy clones in
    the Estimator-compatible runner (MonitoredTrainingSession, its hooks and
    saver), fed by tf.data: synthetic images (--data=synthetic, the default:
    one random batch repeated) or a converted dataset through the parallel
    reader and the network's preprocessing (--data=real --dataset_name
    --dataset_dir); inference is its evaluation (metrics included);
  * bare: the TF-Slim network alone on a constant batch, one momentum-SGD
    step (or one forward pass) per session.run, nothing else; the anchor;
  * keras: keras.applications' model of the same architecture (Keras 3,
    eager/compiled, `train_on_batch` / `predict_on_batch`), where it has one.
Every measurement runs in a fresh process (graph-mode TensorFlow and Keras 3
cannot share one), after --warmup steps, for --steps timed steps. The kinds
are interleaved within each of --rounds rounds, so a drift of the machine
hits them alike; the table gives the median over rounds, the spread
(min-max) and the ratio of each median to the bare graph's. The machine's
speed moves by tens of percent over minutes here: read a ratio together
with the spread.

Clones split the batch (per clone: batch / clones) over logical CPU devices
(--clone_on_cpu's), which share the cores: more clones show the cost of
splitting, not a speed-up. Threads: TensorFlow's defaults unless
--intra_op_threads / --inter_op_threads are given.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.abspath(__file__))

# keras.applications' model of each architecture of the zoo it has.
KERAS_MODELS = {
    'resnet_v1_50': 'ResNet50', 'resnet_v1_101': 'ResNet101',
    'resnet_v1_152': 'ResNet152', 'resnet_v2_50': 'ResNet50V2',
    'resnet_v2_101': 'ResNet101V2', 'resnet_v2_152': 'ResNet152V2',
    'inception_v3': 'InceptionV3', 'inception_resnet_v2': 'InceptionResNetV2',
    'mobilenet_v1': 'MobileNet', 'mobilenet_v2': 'MobileNetV2',
    'mobilenet_v3_large': 'MobileNetV3Large',
    'mobilenet_v3_small': 'MobileNetV3Small', 'vgg_16': 'VGG16',
    'vgg_19': 'VGG19', 'nasnet_mobile': 'NASNetMobile',
    'nasnet_large': 'NASNetLarge',
}
KINDS = ('harness', 'bare', 'keras')
MODES = ('train', 'inference')
NUM_CLASSES = 1000


# -- one measurement, in its own process ----------------------------------------
def _session_config(job):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
  config.device_count['CPU'] = max(job['clones'], 1)
  if job.get('intra_op_threads'):
    config.intra_op_parallelism_threads = job['intra_op_threads']
  if job.get('inter_op_threads'):
    config.inter_op_parallelism_threads = job['inter_op_threads']
  return config


def _random_batch(job, size):
  import numpy as np  # pylint: disable=import-outside-toplevel
  rng = np.random.RandomState(0)
  return (rng.uniform(-1, 1, (job['batch'], size, size, 3)).astype(np.float32),
          rng.randint(0, NUM_CLASSES, job['batch']).astype(np.int64))


def measure_harness(job):
  import quiet_tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import tf_compat  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import classifier  # pylint: disable=import-outside-toplevel
  from datasets import dataset_factory  # pylint: disable=import-outside-toplevel
  from deployment import estimator as est  # pylint: disable=import-outside-toplevel
  from deployment import model_deploy  # pylint: disable=import-outside-toplevel
  tf1 = tf.compat.v1
  tf1.disable_eager_execution()  # this process is a TF 1 program

  class Timer(tf1.train.SessionRunHook):
    """Times the steps after the warm-up ones."""

    def __init__(self):
      self.count, self.start, self.elapsed = 0, None, 0.0

    def before_run(self, run_context):
      if self.count == job['warmup']:
        self.start = time.perf_counter()

    def after_run(self, run_context, run_values):
      self.count += 1
      if self.start is not None:
        self.elapsed = time.perf_counter() - self.start

  model, clones = job['model'], job['clones']
  size = job['image_size']
  training = job['mode'] == 'train'
  num_classes = NUM_CLASSES
  if job['data'] == 'real':
    dataset = dataset_factory.get_dataset(
        job['dataset_name'], job['dataset_split_name'], job['dataset_dir'])
    num_classes = dataset.num_classes
    input_fn = classifier.make_input_fn(dataset, model, job['batch'],
                                        is_training=training)
  else:
    images, labels = _random_batch(job, size)

    def input_fn():
      return tf.data.Dataset.from_tensors((images, labels)).repeat()
  params = classifier.ClassifierParams(
      model_name=model, num_classes=num_classes, batch_size=job['batch'] // clones,
      num_samples_per_epoch=10 ** 6, summarize_activations=False,
      optimizer=classifier.OptimizerParams(optimizer='momentum',
                                           learning_rate=0.001),
      deployment=model_deploy.DeploymentConfig(num_clones=clones,
                                               clone_on_cpu=clones > 1),
      log_every_n_steps=10 ** 9)
  timer = Timer()
  total = job['warmup'] + job['steps']
  with tempfile.TemporaryDirectory() as model_dir:
    config = est.RunConfig(save_summary_steps=None, log_step_count_steps=None,
                           save_checkpoints_secs=None,
                           save_checkpoints_steps=None,
                           session_config=_session_config(job))
    estimator = est.Estimator(classifier.model_fn, model_dir, config=config,
                              params={'classifier': params})
    if training:
      estimator.train(input_fn, hooks=[timer], steps=total)
    else:
      estimator.train(input_fn, steps=1)  # a checkpoint to evaluate
      estimator.evaluate(input_fn, steps=total, hooks=[timer])
  return job['steps'] * job['batch'] / timer.elapsed


def measure_bare(job):
  import tf_compat  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from nets import nets_factory  # pylint: disable=import-outside-toplevel
  tf1 = tf.compat.v1
  tf1.disable_eager_execution()  # this process is a TF 1 program
  model = job['model']
  size = job['image_size']
  training = job['mode'] == 'train'
  x, y = _random_batch(job, size)
  with tf.Graph().as_default():
    images, labels = tf.constant(x), tf.constant(y)
    logits, _ = nets_factory.get_network_fn(model, NUM_CLASSES,
                                            is_training=training)(images)
    if training:
      loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
      step = tf1.train.MomentumOptimizer(0.001, 0.9).minimize(
          loss, global_step=tf1.train.get_or_create_global_step())
      step = tf.group(step, *tf1.get_collection(tf1.GraphKeys.UPDATE_OPS))
    else:
      step = logits.op
    with tf1.Session(config=_session_config(dict(job, clones=1))) as session:
      session.run(tf1.global_variables_initializer())
      for _ in range(job['warmup']):
        session.run(step)
      start = time.perf_counter()
      for _ in range(job['steps']):
        session.run(step)
      return job['steps'] * job['batch'] / (time.perf_counter() - start)


def measure_keras(job):
  import keras  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  if job.get('intra_op_threads'):
    tf.config.threading.set_intra_op_parallelism_threads(job['intra_op_threads'])
  if job.get('inter_op_threads'):
    tf.config.threading.set_inter_op_parallelism_threads(job['inter_op_threads'])
  size = job['image_size']
  x, y = _random_batch(job, size)
  network = getattr(keras.applications, KERAS_MODELS[job['model']])(
      weights=None, classes=NUM_CLASSES, input_shape=(size, size, 3))
  if job['mode'] == 'train':
    network.compile(optimizer=keras.optimizers.SGD(0.001, momentum=0.9),
                    loss='sparse_categorical_crossentropy')
    run = lambda: network.train_on_batch(x, y)  # noqa: E731
  else:
    run = lambda: network.predict_on_batch(x)  # noqa: E731
  for _ in range(job['warmup']):
    run()
  start = time.perf_counter()
  for _ in range(job['steps']):
    run()
  return job['steps'] * job['batch'] / (time.perf_counter() - start)


MEASURE = {'harness': measure_harness, 'bare': measure_bare,
           'keras': measure_keras}


def run_job(job):
  """images/sec of one measurement, in a fresh process."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get(
      'TF_CPP_MIN_LOG_LEVEL', '3'))
  result = subprocess.run(
      [sys.executable, os.path.abspath(__file__), '--_job=' + json.dumps(job)],
      cwd=ROOT, env=env, capture_output=True, text=True)
  lines = [l for l in result.stdout.splitlines() if l.startswith('{')]
  if result.returncode != 0 or not lines:
    raise SystemExit('benchmark_image_classifier: error: %s %s %s failed: %s' % (
        job['kind'], job['mode'], job['model'],
        (result.stderr.strip().splitlines() or ['no output'])[-1]))
  return json.loads(lines[-1])['images_per_sec']


# -- the run ------------------------------------------------------------------
def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--models', default='resnet_v1_50,inception_v3,mobilenet_v1')
  parser.add_argument('--batch_sizes', default='32',
                      help='images per step, all clones together')
  parser.add_argument('--num_clones', default='1')
  parser.add_argument('--modes', default='train,inference')
  parser.add_argument('--kinds', default='harness,bare,keras')
  parser.add_argument('--rounds', type=int, default=5)
  parser.add_argument('--steps', type=int, default=10, help='timed steps')
  parser.add_argument('--warmup', type=int, default=3)
  parser.add_argument('--data', choices=('synthetic', 'real'),
                      default='synthetic')
  parser.add_argument('--dataset_name', default='digits')
  parser.add_argument('--dataset_split_name', default='train')
  parser.add_argument('--dataset_dir', default=None)
  parser.add_argument('--intra_op_threads', type=int, default=0)
  parser.add_argument('--inter_op_threads', type=int, default=0)
  parser.add_argument('--output_json', default=None)
  parser.add_argument('--_job', default=None, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)

  def items(text, name, allowed=None, cast=str):
    values = [cast(v) for v in text.split(',') if v]
    bad = [v for v in values if allowed is not None and v not in allowed]
    if not values or bad:
      parser.error('--%s: %s not one of %s' % (name, ', '.join(map(str, bad))
                                               or 'nothing', ', '.join(allowed)))
    return values
  if args._job:  # pylint: disable=protected-access
    return args
  sys.path.insert(0, ROOT)
  from nets import nets_factory  # pylint: disable=import-outside-toplevel
  args.models = items(args.models, 'models', [
      name for name in nets_factory.list_models()
      if not nets_factory.get_info(name).num_frames])  # images only
  args.batch_sizes = items(args.batch_sizes, 'batch_sizes', cast=int)
  args.num_clones = items(args.num_clones, 'num_clones', cast=int)
  args.modes = items(args.modes, 'modes', MODES)
  args.kinds = items(args.kinds, 'kinds', KINDS)
  for batch in args.batch_sizes:
    for clones in args.num_clones:
      if clones < 1 or batch < clones or batch % clones:
        parser.error('--batch_sizes=%d does not split over --num_clones=%d'
                     % (batch, clones))
  if args.data == 'real' and not args.dataset_dir:
    parser.error('--data=real needs --dataset_dir')
  if args.rounds < 1 or args.steps < 1 or args.warmup < 0:
    parser.error('--rounds and --steps must be at least 1, --warmup 0')
  return args


def jobs_of(args):
  """Every measurement of one round, in the order they run."""
  from nets import nets_factory  # pylint: disable=import-outside-toplevel
  for model in args.models:
    for batch in args.batch_sizes:
      for clones in args.num_clones:
        for mode in args.modes:
          for kind in args.kinds:
            if kind == 'keras' and model not in KERAS_MODELS:
              continue
            if kind != 'harness' and clones != args.num_clones[0]:
              continue  # the anchors run on one device: once per config
            yield dict(
                kind=kind, mode=mode, model=model, batch=batch, clones=clones,
                image_size=nets_factory.get_info(model).default_image_size,
                steps=args.steps, warmup=args.warmup, data=args.data,
                dataset_name=args.dataset_name,
                dataset_split_name=args.dataset_split_name,
                dataset_dir=args.dataset_dir,
                intra_op_threads=args.intra_op_threads,
                inter_op_threads=args.inter_op_threads)


def key(job):
  return (job['model'], job['batch'], job['mode'], job['kind'],
          job['clones'] if job['kind'] == 'harness' else 1)


def main(argv=None):
  args = parse_args(argv)
  if args._job:  # pylint: disable=protected-access
    sys.path.insert(0, ROOT)
    job = json.loads(args._job)  # pylint: disable=protected-access
    print(json.dumps({'images_per_sec': MEASURE[job['kind']](job)}))
    return 0
  jobs = list(jobs_of(args))
  rates = {key(job): [] for job in jobs}
  for round_ in range(args.rounds):
    for job in jobs:
      rate = run_job(job)
      rates[key(job)].append(rate)
      print('round %d/%d  %-14s b%-4d %-9s %-8s clones %d: %8.1f images/sec'
            % (round_ + 1, args.rounds, job['model'], job['batch'],
               job['mode'], job['kind'], key(job)[4], rate), flush=True)
  print()
  print('%-14s %5s %-9s %-8s %6s %10s %19s %7s' % (
      'model', 'batch', 'mode', 'kind', 'clones', 'images/s', 'spread (min-max)',
      '/bare'))
  table = []
  for k, values in rates.items():
    model, batch, mode, kind, clones = k
    median = statistics.median(values)
    bare = rates.get((model, batch, mode, 'bare', 1))
    ratio = median / statistics.median(bare) if bare else None
    table.append(dict(model=model, batch=batch, mode=mode, kind=kind,
                      clones=clones, median=median, min=min(values),
                      max=max(values), rounds=values, ratio_to_bare=ratio))
    print('%-14s %5d %-9s %-8s %6d %10.1f %9.1f-%-9.1f %7s' % (
        model, batch, mode, kind, clones, median, min(values), max(values),
        '%.2f' % ratio if ratio else '-'))
  if args.output_json:
    with open(args.output_json, 'w') as f:
      json.dump({'date': time.strftime('%Y-%m-%d %H:%M'),
                 'machine': '%d cores' % os.cpu_count(),
                 'settings': {k: v for k, v in vars(args).items()
                              if not k.startswith('_')},
                 'results': table}, f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main())
