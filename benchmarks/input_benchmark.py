"""Images/sec of the input pipeline on ImageNet-size JPEGs, against the decoder.

    python benchmarks/input_benchmark.py --rounds=3 --output_markdown=input.md
    python benchmark_image_classifier.py --input_table        (the same)

The data: --images JPEGs of about 500x375 at quality 90 (ImageNet's typical
size and quality), random crops and rescales of scikit-learn's two camera
photographs, converted into TFRecords by the project's image_folder converter.

For each preprocessing family (inception at 299, vgg at 224 -- the
VGG/ResNet preprocessing --, lenet at 28, cifarnet at 32), training and
evaluation, and each core setting (and inception+batch_colours: inception's
training input without the colour distortion, which
--distort_colors_after_batching leaves to the training devices):
  * decode: `tf.io.decode_jpeg` of the whole image alone (records read and
    parsed, images decoded and batched); the anchor;
  * tf-slim: the training/evaluation input_fn in TF-Slim's order (decode the
    whole image, then convert, crop, resize, flip, distort):
    reader.make_dataset(fused_decoding=False);
  * fused: the same input_fn as it runs by default: only the crop decoded,
    uint8 until the resize (preprocessing/encoded_image.py).
Core settings: '1' is one core (the process pinned to one CPU; intra- and
inter-op pools of one thread, one reader, one preprocessing thread); 'all'
is every core (TensorFlow's default pools, --num_readers readers, one
preprocessing thread per core).

--breakdown instead times, on one core, the training preprocessing of the
inception and vgg families stage by stage (each stage a pipeline of the
JPEG bytes held in memory, timed like the variants), so that what each
step costs is a difference of two rates:

    python benchmarks/input_benchmark.py --breakdown

The three run in one process on the same files, interleaved: each round
times every variant in turn, each from a fresh iterator (after warm-up
batches) that is dropped when its time is up, so that no pipeline's
background prefetching runs during another's time, and the table gives the
median rate over rounds and the median of each round's ratios, so load from
other processes hits the three alike. On one core the rate is images per
second of the process's CPU time (the work itself: a shared machine's other
processes barely move it, where they halve a wall-clock rate); on all cores
images per second of wall time. The load average is printed beside them.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# family -> (image size, a network trained with it). The '+batch_colours'
# row is inception's training input with the colour distortion left to the
# training devices (--distort_colors_after_batching).
BATCH_COLOURS = '+batch_colours'
FAMILIES = {'inception': (299, 'inception_v3'), 'vgg': (224, 'resnet_v1_50'),
            'lenet': (28, 'lenet'), 'cifarnet': (32, 'cifarnet'),
            'inception' + BATCH_COLOURS: (299, 'inception_v3')}
VARIANTS = ('decode', 'tf-slim', 'fused')
MODES = ('train', 'eval')


def photo_jpegs(directory, count, seed=0, quality=90):
  """`count` JPEGs of about 500x375 (or 375x500, one in five) in two class
  folders of `directory`: random crops of 55-100% of one side of
  scikit-learn's photographs, rescaled. Returns the file paths."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  from PIL import Image  # pylint: disable=import-outside-toplevel
  import sklearn.datasets  # pylint: disable=import-outside-toplevel
  photos = sklearn.datasets.load_sample_images()
  rng = random.Random(seed)
  paths = []
  for i in range(count):
    label = i % len(photos.images)
    photo = photos.images[label]
    height, width = photo.shape[:2]
    fraction = rng.uniform(0.55, 1.0)
    crop_w = int(width * fraction)
    crop_h = min(height, int(crop_w * rng.uniform(0.7, 0.8)))
    top, left = rng.randint(0, height - crop_h), rng.randint(0, width - crop_w)
    size = (rng.randint(470, 530), 0)
    size = (size[0], int(round(size[0] * crop_h / crop_w)))
    image = Image.fromarray(np.ascontiguousarray(
        photo[top:top + crop_h, left:left + crop_w]))
    image = image.resize(size, Image.BILINEAR)
    if rng.random() < 0.2:
      image = image.transpose(Image.ROTATE_90)
    folder = os.path.join(directory, photos.filenames[label].split(os.sep)[-1]
                          .split('.')[0])
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, '%04d.jpg' % i)
    image.save(path, quality=quality)
    paths.append(path)
  return paths


def make_records(work, count, shards=4):
  """Converted records of `count` photo JPEGs in work/records."""
  sys.path.insert(0, ROOT)
  from datasets import converters  # pylint: disable=import-outside-toplevel
  source = os.path.join(work, 'images')
  photo_jpegs(source, count)
  records = os.path.join(work, 'records')
  converters.convert('image_folder', records, source_dir=source,
                     validation_fraction=0, num_shards=shards,
                     stream=open(os.devnull, 'w'))
  return records


def _decode_dataset(descriptor, batch_size, num_readers, threads):
  """The anchor: read, parse and decode the whole JPEG, batch."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from datasets import reader  # pylint: disable=import-outside-toplevel
  files = list(descriptor.files)

  def decode(serialized):
    parsed = tf.io.parse_single_example(serialized, {
        'image/encoded': tf.io.FixedLenFeature((), tf.string),
        'image/class/label': tf.io.FixedLenFeature((), tf.int64)})
    image = tf.io.decode_jpeg(parsed['image/encoded'], channels=3)
    # Whole images differ in size: a pixel of each is batched, which
    # keeps the decode from being pruned.
    return image[0, 0], parsed['image/class/label']

  dataset = tf.data.Dataset.from_tensor_slices(files).interleave(
      tf.data.TFRecordDataset, cycle_length=min(num_readers, len(files)),
      block_length=1, num_parallel_calls=min(num_readers, len(files)))
  dataset = dataset.repeat().map(decode, num_parallel_calls=threads)
  dataset = dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
  return dataset.with_options(reader.pipeline_options(False, threads))


def measure(config):
  """One family, mode and core setting: {variant: [images/sec per round]}."""
  if config['cores'] == '1':
    os.sched_setaffinity(0, {config['cpu']})
  os.environ['TF_OVERRIDE_GLOBAL_THREADPOOL'] = '1'
  sys.path.insert(0, ROOT)
  import quiet_tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import tf_compat  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from classification import classifier  # pylint: disable=import-outside-toplevel
  from datasets import dataset_factory  # pylint: disable=import-outside-toplevel
  tf1 = tf.compat.v1
  one = config['cores'] == '1'
  threads = 1 if one else os.cpu_count()
  readers = 1 if one else config['num_readers']
  size, model = FAMILIES[config['family']]
  descriptor = dataset_factory.get_dataset('image_folder', 'train',
                                           config['dataset_dir'])
  batch = config['batch_size']
  with tf.Graph().as_default():
    batches = {'decode': _decode_dataset(descriptor, batch, readers, threads)}
    for variant in ('tf-slim', 'fused'):
      batches[variant] = classifier.make_input_fn(
          descriptor, model, batch, is_training=config['mode'] == 'train',
          preprocessing_name=config['family'].split('+')[0],
          image_size=size, num_readers=readers,
          num_preprocessing_threads=threads,
          fused_decoding=variant == 'fused',
          distort_colors=not config['family'].endswith(BATCH_COLOURS))()
    # A pipeline keeps working after its last batch is taken (prefetch,
    # parallel map): its iterator is made afresh before each timed stretch
    # and dropped after it, so no variant's background work lands in the
    # next one's time (with one iterator per variant, each variant paid for
    # the previous one's prefetching: 5-10% on one core).
    iterators = {v: tf1.data.make_initializable_iterator(d)
                 for v, d in batches.items()}
    steps = {v: tf.group(it.get_next()) for v, it in iterators.items()}
    session_config = tf1.ConfigProto(
        intra_op_parallelism_threads=1 if one else 0,
        inter_op_parallelism_threads=1 if one else 0)
    wall = {v: [] for v in VARIANTS}
    cpu = {v: [] for v in VARIANTS}
    with tf1.Session(config=session_config) as session:
      for _ in range(config['rounds']):
        for variant in VARIANTS:
          session.run(iterators[variant].initializer)
          for _ in range(config['warmup']):
            session.run(steps[variant])
          count = 0
          start, start_cpu = time.perf_counter(), time.process_time()
          while count < config['min_batches'] or (
              time.perf_counter() - start < config['seconds']):
            session.run(steps[variant])
            count += 1
          wall[variant].append(count * batch / (time.perf_counter() - start))
          cpu[variant].append(count * batch / max(
              time.process_time() - start_cpu, 1e-9))
          session.run(iterators[variant].initializer)  # stops its threads
  return {'wall': wall, 'cpu': cpu}


def _stages(family):
  """[(name, fn(jpeg bytes) -> tensor)]: training preprocessing of `family`
  cut after each step, in its order; the last is the whole function. Stages
  that end on images of differing sizes return one pixel of them, which
  keeps their work from being pruned."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from preprocessing import encoded_image  # pylint: disable=import-outside-toplevel
  from preprocessing import inception_preprocessing as inception  # pylint: disable=import-outside-toplevel
  from preprocessing import vgg_preprocessing as vgg  # pylint: disable=import-outside-toplevel
  tf1 = tf.compat.v1
  size = FAMILIES[family][0]

  def whole(contents):
    return tf.io.decode_jpeg(contents, channels=3)[0, 0]
  if family == 'inception':
    def crop(contents):
      jpeg = encoded_image.EncodedJpeg(contents, 3)
      begin, extent, _ = tf1.image.sample_distorted_bounding_box(
          jpeg.shape(), tf.constant([[[0.0, 0.0, 1.0, 1.0]]]),
          min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
          area_range=(0.05, 1.0), max_attempts=100,
          use_image_if_no_bounding_boxes=True)
      return jpeg.decode_window(begin[0], begin[1], extent[0], extent[1])

    def then(*steps):
      def fn(contents):
        image = tf.image.convert_image_dtype(crop(contents), tf.float32)
        image = tf1.image.resize_images(image, [size, size])
        for step in steps:
          image = step(image)
        return image
      return fn
    flip = tf.image.random_flip_left_right
    brightness = inception._DISTORTIONS['brightness']  # pylint: disable=protected-access
    saturation = inception._DISTORTIONS['saturation']  # pylint: disable=protected-access
    return [('decode the whole JPEG', whole),
            ('decode the random crop', lambda c: crop(c)[0, 0]),
            ('+ float, resize to %d' % size, then()),
            ('+ random flip', then(flip)),
            ('+ random brightness', then(flip, brightness)),
            ('+ random saturation', then(flip, brightness, saturation)),
            ('+ clip, to [-1, 1]: all of it', lambda c: inception.preprocess_image(
                encoded_image.EncodedJpeg(c, 3), size, size, is_training=True,
                add_image_summaries=False))]

  def draws(contents):
    jpeg = encoded_image.EncodedJpeg(contents, 3)
    side = tf1.random_uniform([], 256, 513, dtype=tf.int32)
    shape = jpeg.shape()
    height, width = vgg._smallest_size_at_least(shape[0], shape[1], side)  # pylint: disable=protected-access
    top, left = encoded_image.random_crop_offset(height, width, size, size)
    return jpeg, side, shape, height, top, left

  def band(contents):
    jpeg, _, shape, height, top, _ = draws(contents)
    lower, upper, _ = vgg._bilinear_samples(top, size, shape[0], height)  # pylint: disable=protected-access
    return jpeg.decode_window(lower[0], 0, upper[-1] - lower[0] + 1,
                              shape[1])[0, 0]

  def resized_crop(contents):
    jpeg, side, _, _, top, left = draws(contents)
    return vgg.resized_crop_from_jpeg(jpeg, side, top, left, size, size)
  return [('decode the whole JPEG', whole),
          ('decode the rows the crop reads', band),
          ('+ resize those rows, crop', resized_crop),
          ('+ random flip', lambda c: tf.image.random_flip_left_right(
              resized_crop(c))),
          ('+ mean: all of it', lambda c: vgg.preprocess_image(
              encoded_image.EncodedJpeg(c, 3), size, size, is_training=True))]


def measure_breakdown(config):
  """{family: [(stage, images/sec of CPU time per round)]} on one core."""
  os.sched_setaffinity(0, {config['cpu']})
  os.environ['TF_OVERRIDE_GLOBAL_THREADPOOL'] = '1'
  sys.path.insert(0, ROOT)
  import quiet_tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import tf_compat  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from datasets import reader  # pylint: disable=import-outside-toplevel
  tf1 = tf.compat.v1
  paths = sorted(os.path.join(folder, name)
                 for folder, _, names in os.walk(config['images_dir'])
                 for name in names if name.endswith('.jpg'))
  contents = []
  for path in paths:
    with open(path, 'rb') as f:
      contents.append(f.read())
  batch = config['batch_size']
  results = {}
  for family in ('inception', 'vgg'):
    with tf.Graph().as_default():
      stages = _stages(family)
      iterators = [tf1.data.make_initializable_iterator(
          tf.data.Dataset.from_tensor_slices(contents).repeat()
          .map(fn, num_parallel_calls=1).batch(batch)
          .prefetch(tf.data.AUTOTUNE)
          .with_options(reader.pipeline_options(False, 1)))
                   for _, fn in stages]
      steps = [it.get_next() for it in iterators]
      rates = [[] for _ in stages]
      with tf1.Session(config=tf1.ConfigProto(
          intra_op_parallelism_threads=1,
          inter_op_parallelism_threads=1)) as session:
        for _ in range(config['rounds']):
          for i, (iterator, step) in enumerate(zip(iterators, steps)):
            session.run(iterator.initializer)
            for _ in range(config['warmup']):
              session.run(step)
            count, start = 0, time.process_time()
            while count < config['min_batches'] or (
                time.process_time() - start < config['seconds']):
              session.run(step)
              count += 1
            rates[i].append(count * batch / (time.process_time() - start))
            session.run(iterator.initializer)
    results[family] = [(name, r) for (name, _), r in zip(stages, rates)]
  return results


def breakdown_markdown(results, header):
  """The stages' rates; 'ms added' is a stage's time less the one before it
  (the crop's decode is the first step of the pipeline, the whole image's
  decode the anchor beside it), its share that of the whole function."""
  lines = [header, '', '| family | stage | img/s | ms per image | ms added | '
           'share of the whole |', '|---|---|---:|---:|---:|---:|']
  for family, stages in results.items():
    ms = [1000.0 / statistics.median(r) for _, r in stages]
    for i, (name, _) in enumerate(stages):
      added = ms[i] - ms[i - 1] if i > 1 else ms[i]
      lines.append('| %s | %s | %.0f | %.3f | %s | %s |' % (
          family, name, 1000.0 / ms[i], ms[i],
          '%.3f' % added if i else '', '%.0f%%' % (100 * added / ms[-1])
          if i else ''))
  return '\n'.join(lines)


def load_average():
  with open('/proc/loadavg') as f:
    return ' '.join(f.read().split()[:3])


def cpu_name():
  with open('/proc/cpuinfo') as f:
    for line in f:
      if line.startswith('model name'):
        return line.split(':', 1)[1].strip()
  return 'unknown CPU'


def configs(args, dataset_dir):
  for cores in args.cores:
    for family in args.families:
      for mode in args.modes:
        if family.endswith(BATCH_COLOURS) and mode != 'train':
          continue  # evaluation distorts nothing
        yield dict(family=family, mode=mode, cores=cores, cpu=args.cpu,
                   dataset_dir=dataset_dir, rounds=args.rounds,
                   warmup=args.warmup, seconds=args.seconds,
                   min_batches=args.min_batches, batch_size=args.batch_size,
                   num_readers=args.num_readers)


def run(config):
  """measure(config) in a fresh process (pinning and thread pools are per
  process); returns its result."""
  output = subprocess.run(
      [sys.executable, os.path.abspath(__file__), '--_config',
       json.dumps(config)], check=True, stdout=subprocess.PIPE,
      cwd=ROOT).stdout.decode()
  return json.loads(output.strip().splitlines()[-1])


def summarize(config, measured):
  """A table row: median rates and the medians of the per-round ratios; on
  one core the rates are per second of the process's CPU time (which other
  processes on the machine barely change), on all cores per second of wall
  time (`wall` and `cpu` in the JSON have both)."""
  rates = measured['cpu' if config['cores'] == '1' else 'wall']

  def ratio(a, b):
    return statistics.median(x / y for x, y in zip(rates[a], rates[b]))
  row = dict(family=config['family'], mode=config['mode'],
             cores=config['cores'],
             load=config.get('load', ''),
             **{v: statistics.median(rates[v]) for v in VARIANTS},
             **{v + '_spread': (min(rates[v]), max(rates[v])) for v in VARIANTS})
  row.update(wall={v: statistics.median(measured['wall'][v]) for v in VARIANTS},
             cpu={v: statistics.median(measured['cpu'][v]) for v in VARIANTS},
             basis='cpu' if config['cores'] == '1' else 'wall')
  row.update(tf_slim_to_decode=ratio('tf-slim', 'decode'),
             fused_to_decode=ratio('fused', 'decode'),
             fused_to_tf_slim=ratio('fused', 'tf-slim'))
  return row


def markdown(rows, header):
  lines = [header, '',
           '| family | mode | cores | decode img/s | TF-Slim order img/s | '
           'fused img/s | TF-Slim / decode | fused / decode | fused / TF-Slim '
           '| load |',
           '|---|---|---|---:|---:|---:|---:|---:|---:|---|']
  for r in rows:
    lines.append('| %s | %s | %s | %.0f | %.0f | %.0f | %.0f%% | %.0f%% | '
                 '%.2fx | %s |' % (
                     r['family'], r['mode'], r['cores'], r['decode'],
                     r['tf-slim'], r['fused'], 100 * r['tf_slim_to_decode'],
                     100 * r['fused_to_decode'], r['fused_to_tf_slim'],
                     r['load']))
  return '\n'.join(lines)


def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--families', default=','.join(FAMILIES))
  parser.add_argument('--modes', default=','.join(MODES))
  parser.add_argument('--cores', default='1,all',
                      help="'1' (one pinned core, one thread everywhere) "
                      "and/or 'all'")
  parser.add_argument('--images', type=int, default=300)
  parser.add_argument('--batch_size', type=int, default=32)
  parser.add_argument('--rounds', type=int, default=3)
  parser.add_argument('--warmup', type=int, default=3,
                      help='untimed batches before each timed stretch')
  parser.add_argument('--seconds', type=float, default=3.0,
                      help='timed seconds per variant and round (at least '
                      '--min_batches batches)')
  parser.add_argument('--min_batches', type=int, default=5)
  parser.add_argument('--num_readers', type=int, default=4,
                      help="readers with --cores=all")
  parser.add_argument('--cpu', type=int, default=0,
                      help="the CPU --cores=1 runs on")
  parser.add_argument('--dataset_dir', default=None,
                      help='a directory to keep the images and records in '
                      'and reuse (default: a temporary one)')
  parser.add_argument('--output_markdown', default=None)
  parser.add_argument('--output_json', default=None)
  parser.add_argument('--breakdown', action='store_true',
                      help='time the inception and vgg training '
                      'preprocessing stage by stage on one core instead')
  parser.add_argument('--_config', default=None, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  for name in ('families', 'modes', 'cores'):
    setattr(args, name, [x for x in getattr(args, name).split(',') if x])
  unknown = [f for f in args.families if f not in FAMILIES]
  if unknown:
    parser.error('unknown family %s (known: %s)' % (unknown[0],
                                                    ', '.join(FAMILIES)))
  return args


def main(argv=None):
  args = parse_args(argv)
  if args._config:  # pylint: disable=protected-access
    config = json.loads(args._config)  # pylint: disable=protected-access
    print(json.dumps(measure_breakdown(config) if config.get('breakdown')
                     else measure(config)))
    return 0
  start = time.time()
  with tempfile.TemporaryDirectory() as work:
    keep = args.dataset_dir or work
    dataset_dir = os.path.join(keep, 'records')
    if not os.path.exists(dataset_dir):
      make_records(keep, args.images)
    if args.breakdown:
      return _breakdown(args, os.path.join(keep, 'images'), start)
    rows = []
    for config in configs(args, dataset_dir):
      before = load_average()
      rates = run(config)
      config['load'] = '%s / %s' % (before, load_average())
      rows.append(summarize(config, rates))
      print(json.dumps(rows[-1]), flush=True)
  header = ('Input pipeline, %d JPEGs of about 500x375 (quality 90), batch %d; '
            '%s, %d cores; median of %d interleaved rounds; images per '
            'second of CPU time on 1 core, of wall time on all; load average '
            '(1/5/15 min) before / after each row.' % (
                args.images, args.batch_size, cpu_name(), os.cpu_count(),
                args.rounds))
  settings = {k: v for k, v in vars(args).items() if not k.startswith('_')}
  print()
  return _report(args, markdown(rows, header), start, settings=settings,
                 results=rows)


def _report(args, table, start, **measured):
  """Prints `table` and writes it and the JSON of `measured` where asked."""
  print(table)
  print('\n%.0f s in all' % (time.time() - start))
  if args.output_markdown:
    with open(args.output_markdown, 'w') as f:
      f.write(table + '\n')
  if args.output_json:
    with open(args.output_json, 'w') as f:
      json.dump(dict(date=time.strftime('%Y-%m-%d %H:%M'), cpu=cpu_name(),
                     **measured), f, indent=1)
  return 0


def _breakdown(args, images_dir, start):
  before = load_average()
  results = run(dict(breakdown=True, images_dir=images_dir, cpu=args.cpu,
                     rounds=args.rounds, warmup=args.warmup,
                     seconds=args.seconds, min_batches=args.min_batches,
                     batch_size=args.batch_size))
  header = ('Training preprocessing stage by stage, %d JPEGs of about 500x375 '
            'held in memory, batch %d, one core (%s); median of %d '
            'interleaved rounds, images per second of CPU time; load average '
            '%s / %s.' % (args.images, args.batch_size, cpu_name(),
                          args.rounds, before, load_average()))
  return _report(args, breakdown_markdown(results, header), start,
                 breakdown=results)


if __name__ == '__main__':
  sys.exit(main())
