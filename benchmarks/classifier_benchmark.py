"""The engine of benchmark_image_classifier.py: measuring, interleaving,
peaks and reports. The command parses and checks the flags; this module
turns them into jobs, runs each in a process of its own (this file, with
--_job=<the job as JSON>, forked from a warm interpreter:
deployment/warm_start.py), and prints and writes the tables.

For each model, batch size and clone count, and for training and inference:
  * harness: the real path -- classifier.model_fn on model_deploy clones in
    the Estimator-compatible runner (MonitoredTrainingSession, its hooks and
    saver), fed by tf.data: synthetic images (--data=synthetic, the default:
    one random batch repeated) or a converted dataset through the parallel
    reader and the network's preprocessing (--data=real --dataset_name
    --dataset_dir; --data=synthetic,real puts both rows side by side);
    inference is its evaluation (metrics included);
  * bare: the TF-Slim network alone on a constant batch, one momentum-SGD
    step on its loss and weight decay (what the harness trains) or one
    forward pass per session.run, nothing else; the anchor;
  * keras: keras.applications' model of the same architecture (Keras 3,
    eager/compiled, `train_on_batch` / `predict_on_batch`), where it has one;
  * reader: the input pipeline alone (records read, decoded, preprocessed
    for the model, batched; no network): with --data=synthetic, 64 random
    JPEGs of 500x375 converted to records first. Its ratio to the bare
    graph says how many times what the network consumes it delivers.
--precisions runs harness and bare graph through --precision's session
rewrite (deployment/session_options.py) and Keras under the matching
mixed-precision policy; the table adds the ratio to float32.
Efficiency: each row's GFLOP/s is its images/sec times the network's forward
FLOPs per image (TensorFlow's profiler on the inference graph; x3 for a
training step), and its fraction of the matmul peak of its precision, which
each round measures first (benchmarks/bf16_peak.py's --peak_size matmul in
float32 and bfloat16). The table's first line names the CPU (model, cores,
AMX, AVX512-BF16 from /proc/cpuinfo) and the peaks.
--zoo_table instead measures every image network (or --models), one process
each: graph build seconds, inference ms/image at batch 1, images/sec at
--zoo_batch_size; printed and written as markdown.
--precision_table instead runs the harness of each model, batch and mode in
float32 and in bfloat16 and traces one step of each after the timed ones
(write_profile, as --profile_dir does): op time by op type side by side,
sorted by bfloat16 time, the casts by direction on rows of their own, each
row's bfloat16/float32 ratio and the part of its bfloat16 time in bfloat16
kernels, and the total; the first line names the CPU, its AMX, AVX512-BF16
and AVX-512, and what --precision=bfloat16 does on it (on a CPU with neither
AVX-512 nor bfloat16 units TensorFlow leaves the graph in float32, and the
table shows it: no op in bfloat16, no casts).
Every measurement runs in a process of its own (graph-mode TensorFlow and
Keras 3 cannot share one; a fork of one interpreter that has imported
TensorFlow, so each pays no import before its steps), after --warmup
steps, for --steps timed steps. The kinds are interleaved within each of
--rounds rounds, so a drift of the machine hits them alike; the table
gives the median over rounds, the spread (min-max) and the ratio of each
median to the bare graph's. The machine's speed moves by tens of percent
over minutes here: read a ratio together with the spread.

The bare graph trains the harness's loss (cross-entropy and TF-Slim's
weight decay), so the two differ only by what the harness adds around a
step: the input iterator, the loss value it fetches and the runner's hooks
(summaries and checkpoints are off here). --profile_dir traces one step of
each for an op table (docs/benchmarks.md has the measurements). The same
kernels' times differ between two processes by 5-10% either way: read a
harness/bare ratio together with its spread.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a file: the measurement's process
  sys.path.insert(0, ROOT)

# First, before anything imports TensorFlow: its start-up lines stay off.
import quiet_tensorflow  # noqa: E402,F401  pylint: disable=unused-import
from deployment import warm_start  # noqa: E402

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
KINDS = ('harness', 'bare', 'keras', 'reader')
DATA = ('synthetic', 'real')
MODES = ('train', 'inference')
NUM_CLASSES = 1000


# -- one measurement, in its own process ----------------------------------------
def _session_config(job):
  from deployment import session_options  # pylint: disable=import-outside-toplevel
  config = session_options.configure(
      precision=job.get('precision', 'float32'),
      intra_op_threads=job.get('intra_op_threads', 0),
      inter_op_threads=job.get('inter_op_threads', 0))
  config.device_count['CPU'] = max(job.get('clones', 1), 1)
  return config


def _images_per_sec(run, job):
  """Images/sec of `run()` (one step of job['batch'] images) over
  job['steps'] timed calls, after job['warmup'] untimed ones."""
  for _ in range(job['warmup']):
    run()
  start = time.perf_counter()
  for _ in range(job['steps']):
    run()
  return job['steps'] * job['batch'] / (time.perf_counter() - start)


def _random_batch(job, size):
  import numpy as np  # pylint: disable=import-outside-toplevel
  rng = np.random.RandomState(0)
  return (rng.uniform(-1, 1, (job['batch'], size, size, 3)).astype(np.float32),
          rng.randint(0, NUM_CLASSES, job['batch']).astype(np.int64))


def _trace_options():
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.compat.v1.RunOptions(
      trace_level=tf.compat.v1.RunOptions.FULL_TRACE,
      output_partition_graphs=True)  # the graph as run, after the rewrites


def _profile_name(job):
  return '%s_b%d_%s_%s_%s' % (job['model'], job['batch'], job['mode'],
                              job['kind'], job['precision'])


def write_profile(job, run_metadata):
  """Writes one traced step: a Chrome trace (chrome://tracing, Perfetto) and
  the op time by op type, which `profile_table` compares across kinds. An op
  that computes in bfloat16 in the graph as run (after grappler's rewrites)
  is counted apart ('Conv2D bf16'), and so is a Cast by its direction
  ('Cast float32->bfloat16'): where a mixed-precision step's time goes."""
  from tensorflow.python.framework import dtypes as tf_dtypes  # pylint: disable=import-outside-toplevel
  from tensorflow.python.client import timeline  # pylint: disable=import-outside-toplevel
  base = os.path.join(job['profile_dir'], _profile_name(job))
  with open(base + '.trace.json', 'w') as f:
    f.write(timeline.Timeline(run_metadata.step_stats)
            .generate_chrome_trace_format())
  suffix = {}
  for graph in run_metadata.partition_graphs:
    for node in graph.node:
      if node.op == 'Cast':
        suffix[node.name] = ' %s->%s' % (
            tf_dtypes.as_dtype(node.attr['SrcT'].type).name,
            tf_dtypes.as_dtype(node.attr['DstT'].type).name)
      elif node.attr['T'].type == tf_dtypes.bfloat16.as_datatype_enum:
        suffix[node.name] = ' bf16'
  by_type, starts, ends = {}, [], []
  for device in run_metadata.step_stats.dev_stats:
    for node in device.node_stats:
      # timeline_label reads 'name = OpType(inputs)'; _SOURCE has none.
      label = node.timeline_label.partition(' = ')[2]
      op_type = label.partition('(')[0] or node.node_name
      op_type += suffix.get(node.node_name, '')
      count, micros = by_type.get(op_type, (0, 0))
      by_type[op_type] = (count + 1, micros + node.all_end_rel_micros)
      starts.append(node.all_start_micros)
      ends.append(node.all_start_micros + node.all_end_rel_micros)
  with open(base + '.ops.json', 'w') as f:
    json.dump({'step_micros': max(ends) - min(starts) if ends else 0,
               'ops': by_type}, f)


def measure_harness(job):
  import tf_compat  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from classification import classifier  # pylint: disable=import-outside-toplevel
  from classification import optimization  # pylint: disable=import-outside-toplevel
  from datasets import dataset_factory  # pylint: disable=import-outside-toplevel
  from deployment import model_deploy  # pylint: disable=import-outside-toplevel
  from runner import estimator as est  # pylint: disable=import-outside-toplevel
  tf1 = tf.compat.v1
  tf1.disable_eager_execution()  # this process is a TF 1 program

  class Timer(tf1.train.SessionRunHook):
    """Times the steps after the warm-up ones."""

    def __init__(self):
      self.count, self.start, self.elapsed = 0, None, 0.0

    def before_run(self, run_context):
      if self.count == job['warmup']:
        self.start = time.perf_counter()
      if self.count == timed:  # the extra step, traced (--profile_dir)
        return tf1.train.SessionRunArgs(None, options=_trace_options())
      return None

    def after_run(self, run_context, run_values):
      self.count += 1
      if self.count == timed + 1:
        write_profile(job, run_values.run_metadata)
      elif self.start is not None:
        self.elapsed = time.perf_counter() - self.start

  model, clones = job['model'], job['clones']
  size = job['image_size']
  training = job['mode'] == 'train'
  num_classes = NUM_CLASSES
  if job['data'] == 'real':
    dataset = dataset_factory.get_dataset(
        job['dataset_name'], job['dataset_split_name'], job['dataset_dir'])
    num_classes = dataset.num_classes
    input_fn = classifier.make_input_fn(
        dataset, model, job['batch'], is_training=training,
        num_readers=job['num_readers'],
        num_preprocessing_threads=job['num_preprocessing_threads'])
  else:
    images, labels = _random_batch(job, size)

    def input_fn():
      return tf.data.Dataset.from_tensors((images, labels)).repeat()
  params = classifier.ClassifierParams(
      model_name=model, num_classes=num_classes, batch_size=job['batch'] // clones,
      num_samples_per_epoch=10 ** 6, summarize_activations=False,
      optimizer=optimization.OptimizerParams(optimizer='momentum',
                                             learning_rate=0.001),
      deployment=model_deploy.DeploymentConfig(num_clones=clones,
                                               clone_on_cpu=clones > 1,
                                               exact=True),
      log_every_n_steps=10 ** 9, precision=job['precision'])
  timer = Timer()
  timed = job['warmup'] + job['steps']
  total = timed + (1 if job.get('profile_dir') else 0)
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
  from classification import classifier  # pylint: disable=import-outside-toplevel
  from nets import nets_factory  # pylint: disable=import-outside-toplevel
  tf1 = tf.compat.v1
  tf1.disable_eager_execution()  # this process is a TF 1 program
  model = job['model']
  size = job['image_size']
  training = job['mode'] == 'train'
  x, y = _random_batch(job, size)
  with tf.Graph().as_default():
    images, labels = tf.constant(x), tf.constant(y)
    # Trained as the harness trains (TF-Slim's default weight decay).
    logits, _ = nets_factory.get_network_fn(
        model, NUM_CLASSES, weight_decay=classifier.ClassifierParams.weight_decay,
        is_training=training)(images)
    if training:
      tf1.losses.sparse_softmax_cross_entropy(labels, logits)
      loss = tf1.losses.get_total_loss()  # with the weight decay
      step = tf1.train.MomentumOptimizer(0.001, 0.9).minimize(
          loss, global_step=tf1.train.get_or_create_global_step())
      step = tf.group(step, *tf1.get_collection(tf1.GraphKeys.UPDATE_OPS))
    else:
      step = logits.op
    with tf1.Session(config=_session_config(dict(job, clones=1))) as session:
      session.run(tf1.global_variables_initializer())
      rate = _images_per_sec(lambda: session.run(step), job)
      if job.get('profile_dir'):
        metadata = tf1.RunMetadata()
        session.run(step, options=_trace_options(), run_metadata=metadata)
        write_profile(job, metadata)
      return rate


def measure_reader(job):
  """The input pipeline alone: records read, decoded, preprocessed for the
  model (training's or evaluation's preprocessing) and batched."""
  import tf_compat  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from classification import classifier  # pylint: disable=import-outside-toplevel
  from datasets import dataset_factory  # pylint: disable=import-outside-toplevel
  tf1 = tf.compat.v1
  dataset = dataset_factory.get_dataset(
      job['dataset_name'], job['dataset_split_name'], job['dataset_dir'])
  with tf.Graph().as_default():
    batch = tf1.data.make_one_shot_iterator(classifier.make_input_fn(
        dataset, job['model'], job['batch'],
        is_training=job['mode'] == 'train', num_readers=job['num_readers'],
        num_preprocessing_threads=job['num_preprocessing_threads'])()
                                            ).get_next()
    step = tf.group(batch)  # nothing leaves the session but the batch is made
    with tf1.Session(config=_session_config(dict(job, clones=1))) as session:
      return _images_per_sec(lambda: session.run(step), job)


def measure_zoo(job):
  """One network of the zoo table: graph build seconds, inference ms/image
  at batch 1 and images/sec at --zoo_batch_size."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tf_compat  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from nets import nets_factory  # pylint: disable=import-outside-toplevel
  tf1 = tf.compat.v1
  info = nets_factory.get_info(job['model'])
  result = {'images_per_sec': None}
  # A batch of 32 clips of a video network needs tens of GB: batch 1 only.
  for batch in (1,) if info.num_frames else (1, job['batch']):
    shape = info.input_shape(batch)
    with tf.Graph().as_default():
      images = tf1.placeholder(tf.float32, shape)
      start = time.perf_counter()
      logits, _ = nets_factory.get_network_fn(job['model'], info.num_classes)(
          images)
      if batch == 1:
        result['build_secs'] = time.perf_counter() - start
      feed = {images: np.random.RandomState(0).uniform(-1, 1, shape)}
      with tf1.Session(config=_session_config(dict(job, clones=1))) as session:
        session.run(tf1.global_variables_initializer())
        for _ in range(max(job['warmup'], 1)):
          session.run(logits, feed)
        times = []
        for _ in range(job['steps']):
          start = time.perf_counter()
          session.run(logits, feed)
          times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    if batch == 1:
      result['ms_per_image_b1'] = seconds * 1000
    else:
      result['images_per_sec'] = batch / seconds
  result['image_size'] = info.default_image_size
  result['num_frames'] = info.num_frames
  return result


def measure_keras(job):
  import keras  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  if job['precision'] != 'float32':  # as --precision: float32 variables
    keras.mixed_precision.set_global_policy('mixed_' + job['precision'])
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
  return _images_per_sec(run, job)


def measure_flops(job):
  """The network's forward floating-point operations per image, counted by
  TensorFlow's profiler on the inference graph at batch 1 (a training step
  is about 3x: forward, gradient of the input, gradient of the weights)."""
  import tf_compat  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from nets import nets_factory  # pylint: disable=import-outside-toplevel
  tf1 = tf.compat.v1
  size = job['image_size']
  with tf.Graph().as_default() as graph:
    nets_factory.get_network_fn(job['model'], NUM_CLASSES)(
        tf.zeros((1, size, size, 3)))
    builder = tf1.profiler.ProfileOptionBuilder
    options = builder(builder.float_operation()).with_empty_output().build()
    nodes, flops = [tf1.profiler.profile(graph, options=options)], 0
    while nodes:  # the ops' own counts, the variables' initializers left out
      node = nodes.pop()
      nodes.extend(node.children)
      if '/Initializer/' not in node.name:
        flops += node.float_ops
    return flops


def measure_peak(job):
  """GFLOP/s of a square float32 and bfloat16 matmul of job['size']: the
  machine's peak for each precision (benchmarks/bf16_peak.py's kernel)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from benchmarks import bf16_peak  # pylint: disable=import-outside-toplevel
  tf.compat.v1.disable_eager_execution()
  size = job['size']
  return {dtype.name: bf16_peak.gflops([(size, size), (size, size)],
                                       tf.matmul, 2 * size ** 3, dtype,
                                       job['steps'])
          for dtype in (tf.float32, tf.bfloat16)}


def cpu_description(path=None):
  """The CPU's model name, core count and bfloat16 units, from `path`
  (/proc/cpuinfo): deployment/session_options.py's reading, the one
  --precision=bfloat16's note on a CPU without such units makes."""
  from deployment import session_options  # pylint: disable=import-outside-toplevel
  return session_options.cpu_description(path)


MEASURE = {'harness': measure_harness, 'bare': measure_bare,
           'keras': measure_keras, 'reader': measure_reader,
           'zoo': measure_zoo, 'flops': measure_flops, 'peak': measure_peak}


def run_job(job):
  """images/sec of one measurement (a dict for the zoo table), in a process
  of its own: a fork of a warm interpreter that has imported TensorFlow
  (deployment/warm_start.py; the steps timed are the same, the 4-5
  CPU-seconds of imports before them are paid once)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get(
      'TF_CPP_MIN_LOG_LEVEL', '3'))
  result = warm_start.run(
      [os.path.abspath(__file__), '--_job=' + json.dumps(job)], env=env,
      cwd=ROOT)
  lines = [l for l in result.stdout.splitlines() if l.startswith('{')]
  if result.returncode != 0 or not lines:
    raise SystemExit('benchmark_image_classifier: error: %s %s %s failed: %s' % (
        job['kind'], job['mode'], job['model'],
        (result.stdout.strip().splitlines() or ['no output'])[-1]))
  return json.loads(lines[-1])['result']


def main(argv=None):
  """The process of one measurement (`run_job`'s): prints its result as the
  last line, {"result": ...}."""
  parser = argparse.ArgumentParser(
      description='one measurement of benchmark_image_classifier.py')
  parser.add_argument('--_job', required=True, help='the job, as JSON')
  job = json.loads(parser.parse_args(argv)._job)  # pylint: disable=protected-access
  print(json.dumps({'result': MEASURE[job['kind']](job)}))
  return 0


# -- the run ------------------------------------------------------------------
def synthetic_jpegs(directory, count=64, width=500, height=375):
  """A converted image-folder dataset of `count` random JPEGs of ImageNet's
  typical size, for the reader on --data=synthetic: real decoding work."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from datasets import converters  # pylint: disable=import-outside-toplevel
  source = os.path.join(directory, 'images')
  rng = np.random.RandomState(0)
  with tf.Graph().as_default():
    small = tf.compat.v1.placeholder(tf.uint8, (height // 8, width // 8, 3))
    # Smooth noise: compresses like a photo, not like white noise.
    jpeg = tf.io.encode_jpeg(tf.cast(tf.image.resize(
        small[None], (height, width))[0], tf.uint8), quality=90)
    with tf.compat.v1.Session() as session:
      for i in range(count):
        folder = os.path.join(source, 'class_%d' % (i % 2))
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, '%03d.jpg' % i), 'wb') as f:
          f.write(session.run(jpeg, {small: rng.randint(
              0, 256, (height // 8, width // 8, 3))}))
  records = os.path.join(directory, 'records')
  converters.convert('image_folder', records, source_dir=source,
                     validation_fraction=0.25, stream=open(os.devnull, 'w'))
  return records


def jobs_of(args, reader_dir=None):
  """Every measurement of one round, in the order they run."""
  from nets import nets_factory  # pylint: disable=import-outside-toplevel
  intra, inter = args.threads[0]
  common = dict(steps=args.steps, warmup=args.warmup,
                intra_op_threads=intra, inter_op_threads=inter,
                num_readers=args.num_readers,
                num_preprocessing_threads=args.num_preprocessing_threads,
                profile_dir=args.profile_dir)
  if args.zoo_table:
    for model in args.models:
      yield dict(common, kind='zoo', mode='inference', model=model,
                 batch=args.zoo_batch_size, clones=1,
                 precision=args.precisions[0])
    return
  for model in args.models:
    for batch in args.batch_sizes:
      for clones in args.num_clones:
        for precision in args.precisions:
         for intra, inter in args.threads:
          for mode in args.modes:
           for kind in args.kinds:
            for data_kind in args.data:
              if kind == 'keras' and model not in KERAS_MODELS:
                continue
              if kind != 'harness' and clones != args.num_clones[0]:
                continue  # the anchors run on one device: once per config
              if kind == 'reader' and precision != args.precisions[0]:
                continue  # the reader has no network to make 16-bit
              if kind != 'harness' and data_kind != args.data[0]:
                continue  # constant batches, or the reader's one dataset
              if kind == 'reader' and 'real' in args.data:
                data_kind = 'real'
              data = dict(data=data_kind, dataset_name=args.dataset_name,
                          dataset_split_name=args.dataset_split_name,
                          dataset_dir=args.dataset_dir)
              if kind == 'reader' and data_kind == 'synthetic':
                data.update(dataset_name='image_folder',
                            dataset_split_name='train', dataset_dir=reader_dir)
              yield dict(
                  common, kind=kind, mode=mode, model=model, batch=batch,
                  clones=clones, precision=precision,
                  intra_op_threads=intra, inter_op_threads=inter,
                  image_size=nets_factory.get_info(model).default_image_size,
                  **data)


def key(job):
  """A row of the table: model, batch, mode, kind, data, clones, precision,
  threads. The anchors' data is the run's first (they feed constants)."""
  return (job['model'], job['batch'], job['mode'], job['kind'],
          job['data'] if job['kind'] in ('harness', 'reader') else 'synthetic',
          job['clones'] if job['kind'] == 'harness' else 1, job['precision'],
          '%d:%d' % (job['intra_op_threads'], job['inter_op_threads']))


def _rate(value, text='%.1f'):
  return '-' if value is None else text % value


def zoo_table(args, jobs):
  """One fresh process per network, --rounds times; medians as markdown.
  A video network's input is one clip (its default frame count)."""
  results = {job['model']: [] for job in jobs}
  for round_ in range(args.rounds):
    for job in jobs:
      result = run_job(job)
      results[job['model']].append(result)
      print('round %d/%d  %-32s build %6.2f s  %8.1f ms/input (b1)  %8s '
            'images/sec (b%d)' % (round_ + 1, args.rounds, job['model'],
                                  result['build_secs'],
                                  result['ms_per_image_b1'],
                                  _rate(result['images_per_sec']),
                                  job['batch']), flush=True)
  table = []
  for model, rounds in results.items():
    row = dict(model=model, image_size=rounds[0]['image_size'],
               num_frames=rounds[0].get('num_frames'),
               batch=args.zoo_batch_size, rounds=rounds)
    for field in ('build_secs', 'ms_per_image_b1', 'images_per_sec'):
      values = [r[field] for r in rounds if r[field] is not None]
      row[field] = statistics.median(values) if values else None
    table.append(row)
  lines = ['| network | size | build (s) | inference ms/image (clip), batch 1 '
           '| inference images/sec, batch %d |' % args.zoo_batch_size,
           '|---|---:|---:|---:|---:|']
  lines += ['| %s | %s | %.1f | %.1f | %s |' % (
      r['model'], '%d' % r['image_size'] + (
          ', %d frames' % r['num_frames'] if r['num_frames'] else ''),
      r['build_secs'], r['ms_per_image_b1'], _rate(r['images_per_sec']))
            for r in table]
  return table, '\n'.join(lines)


def _peak_job(args):
  return dict(kind='peak', size=args.peak_size, steps=max(args.steps, 3))


def _flops_jobs(jobs):
  """One forward-FLOPs count per network of `jobs` (at its image size)."""
  models = {}
  for job in jobs:
    models.setdefault(job['model'], dict(kind='flops', model=job['model'],
                                         image_size=job['image_size']))
  return list(models.values())


def speed_table(args, jobs):
  """Rounds of interleaved measurements (the matmul peak first in each);
  median, spread, ratios and efficiency."""
  flops = {job['model']: run_job(job) for job in _flops_jobs(jobs)}
  rates = {key(job): [] for job in jobs}
  peaks = {'float32': [], 'bfloat16': []}
  for round_ in range(args.rounds):
    peak = run_job(_peak_job(args))
    for dtype, rate in peak.items():
      peaks[dtype].append(rate)
    print('round %d/%d  matmul %d peak: float32 %.1f GFLOP/s, bfloat16 %.1f '
          'GFLOP/s' % (round_ + 1, args.rounds, args.peak_size,
                       peak['float32'], peak['bfloat16']), flush=True)
    for job in jobs:
      rate = run_job(job)
      rates[key(job)].append(rate)
      print('round %d/%d  %-14s b%-4d %-9s %-8s %-8s %-9s clones %d threads '
            '%s: %8.1f images/sec' % (
                round_ + 1, args.rounds, job['model'], job['batch'],
                job['mode'], job['kind'], job['precision'], key(job)[4],
                key(job)[5], key(job)[7], rate), flush=True)
  peak = {dtype: statistics.median(values) for dtype, values in peaks.items()}
  table = []
  for k, values in rates.items():
    model, batch, mode, kind, data, clones, precision, threads = k
    median = statistics.median(values)
    bare = rates.get((model, batch, mode, 'bare', 'synthetic', 1,
                      precision if kind != 'reader' else args.precisions[0],
                      threads))
    fp32 = rates.get((model, batch, mode, kind, data, clones, 'float32',
                      threads))
    gflops = None
    if kind != 'reader':
      gflops = median * flops[model] * (3 if mode == 'train' else 1) / 1e9
    table.append(dict(
        model=model, batch=batch, mode=mode, kind=kind, data=data,
        clones=clones, precision=precision, threads=threads, median=median,
        min=min(values), max=max(values), rounds=values,
        ratio_to_bare=median / statistics.median(bare) if bare else None,
        ratio_to_float32=median / statistics.median(fp32) if fp32 else None,
        forward_flops_per_image=flops[model], gflops_per_sec=gflops,
        fraction_of_peak=(gflops / peak[precision]
                          if gflops and precision in peak else None)))
  cpu = cpu_description()
  lines = [
      'CPU: %s, %d cores; AMX: %s; AVX512-BF16: %s. Matmul peak (%dx%d, '
      'median of %d rounds): float32 %.0f GFLOP/s, bfloat16 %.0f GFLOP/s '
      '(%.2fx).' % (cpu['model'], cpu['cores'], 'yes' if cpu['amx'] else 'no',
                    'yes' if cpu['avx512_bf16'] else 'no', args.peak_size,
                    args.peak_size, args.rounds, peak['float32'],
                    peak['bfloat16'], peak['bfloat16'] / peak['float32']),
      'GFLOP/s: images/sec x the forward FLOPs per image (TF\'s profiler; x3 '
      'for a training step); of peak: GFLOP/s over the matmul peak of the '
      'row\'s precision.', '',
      '| model | batch | mode | kind | data | precision | clones | threads | '
      'images/sec | spread (min-max) | / bare | / float32 | GFLOP/s | '
      'of peak |',
      '|---|---:|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|']
  lines += ['| %s | %d | %s | %s | %s | %s | %d | %s | %.1f | %.1f-%.1f | %s '
            '| %s | %s | %s |' % (
                r['model'], r['batch'], r['mode'], r['kind'], r['data'],
                r['precision'], r['clones'], r['threads'], r['median'],
                r['min'], r['max'], _rate(r['ratio_to_bare'], '%.2f'),
                _rate(r['ratio_to_float32'], '%.2f'),
                _rate(r['gflops_per_sec'], '%.0f'),
                _rate(r['fraction_of_peak'] and 100 * r['fraction_of_peak'],
                      '%.0f%%'))
            for r in table]
  return table, '\n'.join(lines), dict(cpu=cpu, peak_gflops_per_sec=peak,
                                       peak_rounds=peaks)


def profile_table(args, jobs, top=12):
  """Op time by op type of the traced step of each kind, side by side (per
  model, batch, mode and precision): where one kind spends time the other
  does not."""
  groups = {}
  for job in jobs:
    path = os.path.join(args.profile_dir, _profile_name(job) + '.ops.json')
    if job['kind'] in ('harness', 'bare') and os.path.exists(path):
      with open(path) as f:
        groups.setdefault((job['model'], job['batch'], job['mode'],
                           job['precision']), {})[job['kind']] = json.load(f)
  lines = []
  for (model, batch, mode, precision), kinds in groups.items():
    if len(kinds) < 2:
      continue
    harness, bare = kinds['harness'], kinds['bare']
    lines += ['', '%s batch %d %s %s, one traced step: harness %.1f ms, bare '
              'graph %.1f ms (wall time of the step\'s ops)' % (
                  model, batch, mode, precision, harness['step_micros'] / 1e3,
                  bare['step_micros'] / 1e3),
              '| op type | harness ops | harness ms | bare ops | bare ms | '
              'harness - bare ms |', '|---|---:|---:|---:|---:|---:|']
    types = set(harness['ops']) | set(bare['ops'])
    rows = []
    for op_type in types:
      h_count, h_micros = harness['ops'].get(op_type, (0, 0))
      b_count, b_micros = bare['ops'].get(op_type, (0, 0))
      rows.append((op_type, h_count, h_micros / 1e3, b_count, b_micros / 1e3))
    rows.sort(key=lambda r: -abs(r[2] - r[4]))
    lines += ['| %s | %d | %.1f | %d | %.1f | %+.1f |' % (r + (r[2] - r[4],))
              for r in rows[:top]]
    total = [sum(r[i] for r in rows) for i in (1, 2, 3, 4)]
    lines.append('| all (%d types) | %d | %.1f | %d | %.1f | %+.1f |' % (
        len(rows), total[0], total[1], total[2], total[3],
        total[1] - total[3]))
  return '\n'.join(lines[1:])


PRECISION_PAIR = ('float32', 'bfloat16')
# The mixed-precision rewrite's casts (write_profile's names): rows of their
# own in --precision_table, 0 where nothing was cast.
BFLOAT16_CASTS = ('Cast float32->bfloat16', 'Cast bfloat16->float32')


def precision_jobs(args, profile_dir):
  """--precision_table's jobs: the harness of each of --models,
  --batch_sizes and --modes in float32 and in bfloat16 (the first
  --num_clones, --threads and --data), each tracing one step into
  `profile_dir` after its timed ones."""
  narrowed = argparse.Namespace(**dict(
      vars(args), kinds=['harness'], precisions=list(PRECISION_PAIR),
      num_clones=args.num_clones[:1], threads=args.threads[:1],
      data=args.data[:1], profile_dir=profile_dir, zoo_table=False))
  return list(jobs_of(narrowed))


def _base_op_type(op_type):
  """'_MklNativeConv2D bf16' -> '_MklNativeConv2D' (write_profile's suffix of
  an op computing in bfloat16); a Cast keeps its direction."""
  return op_type[:-len(' bf16')] if op_type.endswith(' bf16') else op_type


def _median_trace(traces):
  """One trace ({'step_micros', 'ops': {op type: (count, micros)}}) of the
  median over rounds: per op type its median time (0 in a round without
  it) and its most frequent count."""
  types = set().union(*(t['ops'] for t in traces))
  ops = {}
  for op_type in types:
    counts = [t['ops'].get(op_type, (0, 0))[0] for t in traces]
    ops[op_type] = (max(set(counts), key=counts.count), statistics.median(
        t['ops'].get(op_type, (0, 0))[1] for t in traces))
  return {'step_micros': statistics.median(t['step_micros'] for t in traces),
          'ops': ops}


def precision_rows(fp32, bf16):
  """Rows of op type, float32 ms, bfloat16 ms and the part of the bfloat16
  ms that ran in bfloat16 kernels, from two traces (write_profile's): an op
  type's bfloat16 and float32 instances together, a Cast per direction;
  sorted by bfloat16 time, then float32 time. The bfloat16 casts are
  always rows."""
  rows = {cast: [0.0, 0.0, 0.0] for cast in BFLOAT16_CASTS}
  for column, trace in ((0, fp32), (1, bf16)):
    for op_type, (_, micros) in trace['ops'].items():
      row = rows.setdefault(_base_op_type(op_type), [0.0, 0.0, 0.0])
      row[column] += micros / 1e3
      if column == 1 and op_type.endswith(' bf16'):
        row[2] += micros / 1e3
  return sorted(((op_type,) + tuple(times) for op_type, times in rows.items()),
                key=lambda r: (-r[2], -r[1], r[0]))


def _precision_line(name, fp32_ms, bf16_ms, kernels_ms):
  return '| %s | %.1f | %.1f | %s | %s |' % (
      name, fp32_ms, bf16_ms,
      '%.2f' % (bf16_ms / fp32_ms) if fp32_ms >= 0.05 else '-',
      '%.0f%%' % (100 * kernels_ms / bf16_ms) if kernels_ms else '-')


def precision_table(args, jobs, top=15):
  """--precision_table: each job run (and its step traced) once per round,
  interleaved; per model, batch and mode, op time by op type of float32
  and bfloat16 side by side, sorted by bfloat16 time, the casts their own
  rows (BFLOAT16_CASTS), the rest beyond `top` rows in one, and the total
  (a ratio to less than 0.05 float32 ms reads -). The first line names the
  CPU and what --precision=bfloat16 does on it."""
  from deployment import session_options  # pylint: disable=import-outside-toplevel
  traces = {key(job): [] for job in jobs}
  rates = {key(job): [] for job in jobs}
  for round_ in range(args.rounds):
    for job in jobs:
      rate = run_job(job)
      path = os.path.join(job['profile_dir'], _profile_name(job) + '.ops.json')
      with open(path) as f:
        traces[key(job)].append(json.load(f))
      rates[key(job)].append(rate)
      print('round %d/%d  %-14s b%-4d %-9s harness %-8s: %8.1f images/sec, '
            'one step traced' % (round_ + 1, args.rounds, job['model'],
                                 job['batch'], job['mode'], job['precision'],
                                 rate), flush=True)
  cpu = session_options.cpu_description()
  note = session_options.bfloat16_note(cpu) or {
      'units': '--precision=bfloat16 computes on its bfloat16 units',
      'unknown': 'No x86 CPU flags to tell what --precision=bfloat16 '
                 'computes in'}[session_options.bfloat16_compute(cpu)]
  lines = ['CPU: %s, %d cores; AMX: %s; AVX512-BF16: %s; AVX-512: %s. %s.' % (
      cpu['model'], cpu['cores'], *('yes' if cpu[flag] else 'no' for flag in
                                    ('amx', 'avx512_bf16', 'avx512f')), note),
           'Op ms: an op type\'s time summed over its ops in one traced step '
           '(median of %d round%s; ops run side by side, so the sum exceeds '
           'the step). bf16 kernels: the part of the bfloat16 ms in ops that '
           'compute in bfloat16.' % (args.rounds,
                                     '' if args.rounds == 1 else 's')]
  table = []
  groups = {}
  for job in jobs:
    groups.setdefault((job['model'], job['batch'], job['mode']), {})[
        job['precision']] = key(job)
  for (model, batch, mode), keys in groups.items():
    fp32, bf16 = (_median_trace(traces[keys[p]]) for p in PRECISION_PAIR)
    fp32_rate, bf16_rate = (statistics.median(rates[keys[p]])
                            for p in PRECISION_PAIR)
    rows = precision_rows(fp32, bf16)
    instances = sum(count for _, (count, _) in bf16['ops'].items())
    in_bf16 = sum(count for op_type, (count, _) in bf16['ops'].items()
                  if op_type.endswith(' bf16'))
    casts = sum(count for op_type, (count, _) in bf16['ops'].items()
                if op_type.startswith('Cast ') and 'bfloat16' in op_type)
    lines += ['', '%s batch %d %s, harness, one traced step: float32 %.1f ms, '
              'bfloat16 %.1f ms (%.2fx); %.1f and %.1f images/sec over the '
              'timed steps' % (model, batch, mode, fp32['step_micros'] / 1e3,
                               bf16['step_micros'] / 1e3,
                               bf16['step_micros'] / fp32['step_micros']
                               if fp32['step_micros'] else float('nan'),
                               fp32_rate, bf16_rate),
              'bfloat16 step: %d of %d ops in bfloat16, %d casts to or from '
              'bfloat16%s' % (in_bf16, instances, casts, '' if in_bf16 else
                              ': it ran in float32'),
              '| op type | fp32 ms | bf16 ms | bf16 / fp32 | bf16 kernels |',
              '|---|---:|---:|---:|---:|']
    shown = [r for i, r in enumerate(rows)
             if i < top or r[0] in BFLOAT16_CASTS]
    rest = [r for r in rows if r not in shown]
    lines += [_precision_line(*r) for r in shown]
    if rest:
      lines.append(_precision_line('other (%d types)' % len(rest), *(
          sum(r[i] for r in rest) for i in (1, 2, 3))))
    lines.append(_precision_line('all (%d types)' % len(rows), *(
        sum(r[i] for r in rows) for i in (1, 2, 3))))
    table.append(dict(
        model=model, batch=batch, mode=mode,
        step_ms={p: t['step_micros'] / 1e3 for p, t in zip(PRECISION_PAIR,
                                                           (fp32, bf16))},
        images_per_sec={'float32': fp32_rate, 'bfloat16': bf16_rate},
        bfloat16_ops=in_bf16, ops=instances, bfloat16_casts=casts,
        op_types=[dict(op_type=r[0], float32_ms=r[1], bfloat16_ms=r[2],
                       bfloat16_kernels_ms=r[3]) for r in rows]))
  return table, '\n'.join(lines), dict(cpu=cpu)


def measure_and_report(args):
  """Every measurement of `args` (benchmark_image_classifier.py's flags,
  checked), --rounds times interleaved; prints the table (with --profile_dir,
  the op table after it) and writes it to --output_markdown, and it with
  every measurement to --output_json."""
  start = time.time()
  precision = getattr(args, 'precision_table', False)
  with tempfile.TemporaryDirectory() as work:
    reader_dir = None
    if ('reader' in args.kinds and 'real' not in args.data
        and not args.zoo_table and not precision):
      reader_dir = synthetic_jpegs(work)
    machine = {}
    if precision:
      jobs = precision_jobs(args, args.profile_dir or work)
      table, markdown, machine = precision_table(args, jobs)
    else:
      jobs = list(jobs_of(args, reader_dir))
      if args.zoo_table:
        table, markdown = zoo_table(args, jobs)
      else:
        table, markdown, machine = speed_table(args, jobs)
  if args.profile_dir and not args.zoo_table and not precision:
    markdown += '\n\n' + profile_table(args, jobs)
  print()
  print(markdown)
  print('\n%.0f s in all' % (time.time() - start))
  if args.output_markdown:
    with open(args.output_markdown, 'w') as f:
      f.write(markdown + '\n')
  if args.output_json:
    with open(args.output_json, 'w') as f:
      json.dump({'date': time.strftime('%Y-%m-%d %H:%M'),
                 'machine': '%d cores' % os.cpu_count(),
                 'cpu': machine.get('cpu', cpu_description()),
                 'peak_gflops_per_sec': machine.get('peak_gflops_per_sec'),
                 'seconds': time.time() - start,
                 'settings': {k: v for k, v in vars(args).items()
                              if not k.startswith('_')},
                 'results': table}, f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main())
