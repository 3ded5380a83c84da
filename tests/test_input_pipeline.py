"""The fused input pipeline (only the crop of a JPEG decoded) against TF-Slim's
order (decode everything, then crop), on real photographs converted by
image_folder: evaluation is bit-identical, training has the same
distribution (the same floats for the same random draws), PNG records and
channel handling work as before, and a slow input is reported."""
import os

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from benchmarks import input_benchmark
from classification import classifier
from classification import progress
from datasets import converters
from datasets import dataset_factory
from datasets import reader
from preprocessing import encoded_image
from preprocessing import inception_preprocessing
from preprocessing import preprocessing_factory
from preprocessing import vgg_preprocessing
from runner import estimator as est
import scripts

tf1 = tf.compat.v1
FAMILIES = {'inception': 299, 'vgg': 224, 'lenet': 28, 'cifarnet': 32}


@pytest.fixture(scope='module')
def photos(tmp_path_factory):
  """12 photo JPEGs of about 500x375 (some portrait) and their records."""
  work = str(tmp_path_factory.mktemp('photos'))
  paths = input_benchmark.photo_jpegs(os.path.join(work, 'images'), 12, seed=3)
  records = os.path.join(work, 'records')
  converters.convert('image_folder', records,
                     source_dir=os.path.join(work, 'images'),
                     validation_fraction=0, stream=open(os.devnull, 'w'))
  return paths, dataset_factory.get_dataset('image_folder', 'train', records)


@pytest.fixture(scope='module')
def mixed_records(tmp_path_factory, photos):
  """Records of the same photos, half of them stored as PNG."""
  from PIL import Image  # pylint: disable=import-outside-toplevel
  work = str(tmp_path_factory.mktemp('mixed'))
  for i, path in enumerate(photos[0]):
    folder = os.path.join(work, 'images', os.path.basename(os.path.dirname(path)))
    os.makedirs(folder, exist_ok=True)
    image = Image.open(path)
    if i % 2:
      image.save(os.path.join(folder, '%02d.png' % i))
    else:
      with open(path, 'rb') as f, open(os.path.join(folder, '%02d.jpg' % i),
                                       'wb') as out:
        out.write(f.read())
  records = os.path.join(work, 'records')
  converters.convert('image_folder', records,
                     source_dir=os.path.join(work, 'images'),
                     validation_fraction=0, stream=open(os.devnull, 'w'))
  return dataset_factory.get_dataset('image_folder', 'train', records)


def read_all(descriptor, family, is_training, fused, use_grayscale=False,
             seed=None):
  """Every record of `descriptor` preprocessed in order, as numpy arrays."""
  size = FAMILIES[family]
  with tf.Graph().as_default():
    if seed is not None:
      tf1.set_random_seed(seed)
    dataset = classifier.make_input_fn(
        descriptor, 'resnet_v1_50', 1, is_training=is_training,
        preprocessing_name=family, image_size=size, num_readers=1,
        num_preprocessing_threads=1, num_epochs=1, deterministic=True,
        use_grayscale=use_grayscale, fused_decoding=fused)()
    if is_training:
      dataset = dataset.unbatch()
    batch = tf1.data.make_one_shot_iterator(dataset).get_next()
    images = []
    with tf1.Session() as session:
      try:
        while True:
          images.append(session.run(batch)[0])
      except tf.errors.OutOfRangeError:
        pass
  return images


@pytest.mark.parametrize('family', sorted(FAMILIES))
def test_evaluation_is_bit_identical_to_tf_slims_order(photos, family):
  fused = read_all(photos[1], family, False, fused=True)
  reference = read_all(photos[1], family, False, fused=False)
  assert len(fused) == len(reference) == 12
  for a, b in zip(fused, reference):
    assert a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('family', ['inception', 'vgg', 'cifarnet'])
def test_jpeg_records_reach_the_preprocessing_undecoded(photos, family,
                                                        monkeypatch):
  """The fused path is the one taken: preprocessing decodes windows."""
  windows = []
  original = encoded_image.EncodedJpeg.decode_window
  monkeypatch.setattr(encoded_image.EncodedJpeg, 'decode_window',
                      lambda self, *a: windows.append(a) or original(self, *a))
  with tf.Graph().as_default():
    classifier.make_input_fn(photos[1], 'resnet_v1_50', 2, is_training=True,
                             preprocessing_name=family,
                             image_size=FAMILIES[family])()
  assert windows


def test_a_decoded_window_is_the_window_of_the_decoded_image(photos):
  """decode_and_crop_jpeg alone differs in a window's edge columns (chroma
  upsampling); the margin makes every pixel the whole image's."""
  rng = np.random.RandomState(0)
  with tf.Graph().as_default(), tf1.Session() as session:
    contents = tf1.placeholder(tf.string, [])
    window = tf1.placeholder(tf.int32, [4])
    whole = tf.io.decode_jpeg(contents, channels=3)
    part = encoded_image.EncodedJpeg(contents, 3).decode_window(
        window[0], window[1], window[2], window[3])
    plain = tf.image.decode_and_crop_jpeg(contents, window, channels=3)
    plain_differs = 0
    for path in photos[0]:
      with open(path, 'rb') as f:
        data = f.read()
      image = session.run(whole, {contents: data})
      height, width = image.shape[:2]
      for _ in range(8):
        y, x = rng.randint(height // 2), rng.randint(width // 2)
        h, w = rng.randint(1, height - y + 1), rng.randint(1, width - x + 1)
        got, bare = session.run([part, plain], {contents: data,
                                                window: [y, x, h, w]})
        np.testing.assert_array_equal(got, image[y:y + h, x:x + w])
        plain_differs += not np.array_equal(bare, image[y:y + h, x:x + w])
  assert plain_differs  # the control: without the margin, edges differ


def test_vgg_crop_of_the_resized_jpeg_equals_resizing_all_then_cropping(photos):
  """For the same draws (smaller side, crop offset) the same floats, at the
  extremes of both."""
  rng = np.random.RandomState(1)
  with tf.Graph().as_default(), tf1.Session() as session:
    contents = tf1.placeholder(tf.string, [])
    side, top, left = (tf1.placeholder(tf.int32, []) for _ in range(3))
    resized = vgg_preprocessing._aspect_preserving_resize(  # pylint: disable=protected-access
        tf.io.decode_jpeg(contents, channels=3), side)
    reference = tf.slice(resized, [top, left, 0], [224, 224, 3])
    fused = vgg_preprocessing.resized_crop_from_jpeg(
        encoded_image.EncodedJpeg(contents, 3), side, top, left, 224, 224)
    for path in photos[0][:6]:
      with open(path, 'rb') as f:
        data = f.read()
      for smaller in (256, 257, 331, 384, 511, 512):
        shape = session.run(tf.shape(resized), {contents: data, side: smaller})
        offsets = [(0, 0), (shape[0] - 224, shape[1] - 224)] + [
            (rng.randint(shape[0] - 223), rng.randint(shape[1] - 223))
            for _ in range(2)]
        for y, x in offsets:
          feed = {contents: data, side: smaller, top: y, left: x}
          a, b = session.run([reference, fused], feed)
          np.testing.assert_array_equal(a, b)


def _train_samples(data, family, fused, count, seed):
  """`count` training preprocessings of one JPEG, and the crop boxes drawn."""
  size = FAMILIES[family]
  fn = preprocessing_factory.get_preprocessing(family, is_training=True)
  with tf.Graph().as_default():
    tf1.set_random_seed(seed)
    contents = tf.constant(data)
    image = (encoded_image.EncodedJpeg(contents, 3) if fused
             else tf.io.decode_jpeg(contents, channels=3))
    output = fn(image, size, size, add_image_summaries=False)
    with tf1.Session() as session:
      return np.stack([session.run(output) for _ in range(count)])


def _statistics(images):
  """Per image: channel means, top-bottom and left-right differences of the
  mean (where the crop falls, and flips), and the spread (scale)."""
  half_h, half_w = images.shape[1] // 2, images.shape[2] // 2
  return dict(
      **{'mean_%d' % c: images[..., c].mean(axis=(1, 2)) for c in range(3)},
      top_minus_bottom=(images[:, :half_h].mean(axis=(1, 2, 3))
                        - images[:, half_h:].mean(axis=(1, 2, 3))),
      left_minus_right=(images[:, :, :half_w].mean(axis=(1, 2, 3))
                        - images[:, :, half_w:].mean(axis=(1, 2, 3))),
      abs_left_minus_right=np.abs(images[:, :, :half_w].mean(axis=(1, 2, 3))
                                  - images[:, :, half_w:].mean(axis=(1, 2, 3))),
      std=images.std(axis=(1, 2, 3)))


def _same_distribution(a, b):
  """Two-sample Kolmogorov-Smirnov p-value of every statistic."""
  sa, sb = _statistics(a), _statistics(b)
  return {k: scipy.stats.ks_2samp(sa[k], sb[k]).pvalue for k in sa}


@pytest.mark.slow
@pytest.mark.parametrize('family', ['inception', 'vgg', 'cifarnet'])
def test_training_has_tf_slims_distribution_of_crops_flips_and_colours(
    photos, family):
  """300 preprocessings of one photograph each way: the distributions of
  where the crop falls, its scale, flips and colours agree (KS p > 0.001
  for every statistic, fixed seeds: not flaky); the control, TF-Slim's
  order without its random crop, is told apart."""
  with open(photos[0][0], 'rb') as f:
    data = f.read()
  fused = _train_samples(data, family, True, 300, seed=1)
  reference = _train_samples(data, family, False, 300, seed=2)
  p_values = _same_distribution(fused, reference)
  assert min(p_values.values()) > 1e-3, p_values
  if family == 'inception':
    # The control: the whole image instead of a random crop.
    size = FAMILIES[family]
    with tf.Graph().as_default():
      tf1.set_random_seed(3)
      output = inception_preprocessing.preprocess_for_train(
          tf.io.decode_jpeg(tf.constant(data), channels=3), size, size,
          add_image_summaries=False, random_crop=False)
      with tf1.Session() as session:
        control = np.stack([session.run(output) for _ in range(300)])
    assert min(_same_distribution(fused, control).values()) < 1e-6


@pytest.mark.slow
def test_crop_boxes_drawn_from_the_header_match_those_of_the_decoded_image(
    photos):
  """Inception's crop box: from the JPEG header's shape (fused) and from
  the decoded image's (TF-Slim), the same distribution of areas, aspect
  ratios and positions; with the same op seeds, the same boxes."""
  with open(photos[0][0], 'rb') as f:
    data = f.read()
  bbox = np.array([[[0.1, 0.2, 0.9, 0.7]]], np.float32)

  def boxes(fused, seed, seed2):
    with tf.Graph().as_default():
      contents = tf.constant(data)
      shape = (encoded_image.EncodedJpeg(contents, 3).shape() if fused else
               tf.shape(tf.io.decode_jpeg(contents, channels=3)))
      _, _, box = tf1.image.sample_distorted_bounding_box(
          shape, bounding_boxes=bbox, min_object_covered=0.1,
          aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0),
          max_attempts=100, use_image_if_no_bounding_boxes=True,
          seed=seed, seed2=seed2)
      with tf1.Session() as session:
        return np.stack([session.run(box)[0, 0] for _ in range(400)])

  np.testing.assert_array_equal(boxes(True, 5, 6), boxes(False, 5, 6))
  a, b = boxes(True, 1, 2), boxes(False, 3, 4)
  for stat in (lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1]),
               lambda x: (x[:, 3] - x[:, 1]) / (x[:, 2] - x[:, 0]),
               lambda x: x[:, 0] + x[:, 2], lambda x: x[:, 1] + x[:, 3]):
    assert scipy.stats.ks_2samp(stat(a), stat(b)).pvalue > 1e-3


@pytest.mark.parametrize('family', ['inception', 'vgg'])
def test_png_records_take_the_decoded_path(mixed_records, family):
  """Half PNG, half JPEG: evaluation bit-identical to TF-Slim's order, and
  training preprocesses every record."""
  fused = read_all(mixed_records, family, False, fused=True)
  reference = read_all(mixed_records, family, False, fused=False)
  assert len(fused) == 12
  for a, b in zip(fused, reference):
    np.testing.assert_array_equal(a, b)
  trained = read_all(mixed_records, family, True, fused=True, seed=0)
  assert len(trained) == 12
  assert all(t.shape == (FAMILIES[family],) * 2 + (3,) for t in trained)


@pytest.mark.parametrize('family', ['inception', 'vgg', 'cifarnet'])
def test_grayscale_and_one_channel_decoding_still_work(photos, family):
  gray = read_all(photos[1], family, False, fused=True, use_grayscale=True)
  np.testing.assert_array_equal(
      np.stack(gray), np.stack(read_all(photos[1], family, False, fused=False,
                                        use_grayscale=True)))
  assert gray[0].shape[-1] == 1
  descriptor = photos[1]
  one = dataset_factory.Dataset(
      name=descriptor.name, split_name=descriptor.split_name,
      file_pattern=descriptor.file_pattern,
      num_samples=descriptor.num_samples, num_classes=descriptor.num_classes,
      labels_to_names=descriptor.labels_to_names, channels=1,
      decoder=dataset_factory.example_decoder(1), files=descriptor.files,
      shards=descriptor.shards, tf_slim_records=True)
  fused = read_all(one, family, False, fused=True)
  np.testing.assert_array_equal(
      np.stack(fused), np.stack(read_all(one, family, False, fused=False)))
  assert fused[0].shape[-1] == 1
  trained = read_all(one, family, True, fused=True, seed=0)
  assert trained[0].shape == (FAMILIES[family],) * 2 + (1,)


def _progress_lines(input_delay, step_delay, steps=12):
  """The training progress lines of `steps` steps fed by a Dataset through
  the runner, each element taking `input_delay` s and each step
  `step_delay` s."""
  def slow(seconds):
    def sleep(x):
      import time  # pylint: disable=import-outside-toplevel
      time.sleep(seconds)
      return x
    return lambda x: tf.numpy_function(sleep, [x], tf.float32, stateful=True)

  lines = []
  with tf.Graph().as_default():
    dataset = tf.data.Dataset.from_tensors(tf.constant(1.0)).repeat().map(
        slow(input_delay)).prefetch(1)
    features, _ = est._features_and_labels(dataset)  # pylint: disable=protected-access
    step = tf1.train.get_or_create_global_step()
    train = tf.group(tf1.assign_add(step, 1), slow(step_delay)(features))
    hook = progress.TrainingProgressHook(
        features, tf.constant(1), every_n_steps=steps // 2, log=lines.append,
        input_wait=tf1.get_collection(est.INPUT_WAIT_SECONDS)[-1])
    with tf1.train.MonitoredSession(hooks=[hook]) as session:
      for _ in range(steps):
        session.run(train)
  return lines


def test_a_slow_input_is_reported_as_input_bound():
  # 0.2 s per batch: a loaded CI machine adds some ms per step outside the
  # wait (Python, hooks), which must stay well under the 20% margin.
  lines = _progress_lines(input_delay=0.2, step_delay=0.0)
  assert lines[-2].startswith('step 12: loss'), lines
  assert lines[-1].startswith('input-bound: '), lines
  waited = int(lines[-1].split('input-bound: ')[1].split('%')[0])
  assert waited >= 80, lines


def test_a_slow_step_with_a_fast_input_is_not_input_bound():
  lines = _progress_lines(input_delay=0.0, step_delay=0.05)
  assert lines and not any('input-bound' in line for line in lines), lines


def test_input_bound_note_names_the_fraction_from_the_threshold():
  assert progress.input_bound_note(None) == ''
  assert progress.input_bound_note(progress.INPUT_BOUND / 2) == ''
  assert progress.input_bound_note(0.64).startswith(
      'input-bound: 64% of the time waiting for batches')


@pytest.mark.slow
def test_the_input_benchmark_reports_three_variants_and_their_ratios(tmp_path):
  import json  # pylint: disable=import-outside-toplevel
  out = str(tmp_path / 'input.json')
  result = scripts.run(
      input_benchmark.__file__, '--families=cifarnet', '--modes=train',
      '--cores=1', '--images=8', '--rounds=2', '--seconds=0.1',
      '--min_batches=1', '--warmup=1', '--batch_size=4',
      '--output_json=' + out, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  row, = json.load(open(out))['results']
  assert (row['family'], row['mode'], row['cores']) == ('cifarnet', 'train', '1')
  assert all(row[v] > 0 for v in input_benchmark.VARIANTS)
  assert 0 < row['fused_to_decode'] and 0 < row['fused_to_tf_slim']
  assert '| cifarnet | train | 1 |' in result.stdout


@pytest.mark.slow
def test_the_breakdown_times_every_stage_up_to_the_whole_function(tmp_path):
  import json  # pylint: disable=import-outside-toplevel
  out = str(tmp_path / 'breakdown.json')
  result = scripts.run(
      input_benchmark.__file__, '--breakdown', '--images=8', '--rounds=1',
      '--seconds=0.1', '--min_batches=1', '--warmup=1', '--batch_size=4',
      '--output_json=' + out, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  stages = json.load(open(out))['breakdown']
  assert sorted(stages) == ['inception', 'vgg']
  for family, rows in stages.items():
    names = [name for name, _ in rows]
    assert names[0] == 'decode the whole JPEG' and 'all of it' in names[-1]
    assert all(rate > 0 for _, rates in rows for rate in rates), rows
    assert ('| %s | + random flip |' % family) in result.stdout


def test_per_image_saturation_is_the_kernels_with_each_images_factor():
  """adjust_saturation_per_image against tf.image.adjust_saturation image by
  image, on values brightness can leave outside [0, 1]: grey, black and
  negative pixels, a saturated channel."""
  rng = np.random.RandomState(0)
  images = rng.uniform(-0.2, 1.2, [6, 20, 30, 3]).astype(np.float32)
  images[0, :4], images[1, :4], images[2, :4] = 0.3, 0.0, -0.1
  images[3, :4, :, 0] = 1.0
  factors = rng.uniform(0.5, 1.5, [6]).astype(np.float32)
  with tf.Graph().as_default(), tf1.Session() as session:
    got = session.run(inception_preprocessing.adjust_saturation_per_image(
        tf.constant(images), tf.constant(factors[:, None, None, None])))
    want = session.run([tf.image.adjust_saturation(images[i], factors[i])
                        for i in range(6)])
  np.testing.assert_allclose(got, np.stack(want), rtol=0, atol=2e-6)


def test_colours_after_batching_need_fast_mode_and_colour_images():
  image = tf.zeros([40, 40, 3], tf.uint8)
  with tf.Graph().as_default():
    for kwargs in (dict(fast_mode=False), dict(use_grayscale=True)):
      with pytest.raises(ValueError, match='needs fast_mode and colour'):
        inception_preprocessing.preprocess_for_train(
            image, 32, 32, distort_colors=False, add_image_summaries=False,
            **kwargs)


@pytest.mark.slow
def test_colours_distorted_after_batching_have_tf_slims_distribution(photos):
  """One cropped photograph distorted 400 times per image (TF-Slim's
  distort_color, fast mode) and as a batch of 400 (distort_color_batch):
  the same distributions of what the colour distortion changes -- the
  brightness shift, the chroma ratio, each channel's mean (KS p > 0.001,
  fixed seeds) -- while undistorted copies are told apart."""
  with open(photos[0][0], 'rb') as f:
    data = f.read()
  with tf.Graph().as_default():
    tf1.set_random_seed(1)
    crop = inception_preprocessing.preprocess_image(
        encoded_image.EncodedJpeg(tf.constant(data), 3), 64, 64,
        is_training=True, add_image_summaries=False, distort_colors=False)
    with tf1.Session() as session:
      image = session.run(crop)
  batch = np.repeat(image[np.newaxis], 400, axis=0)
  with tf.Graph().as_default():
    tf1.set_random_seed(2)
    one = tf.constant(image)
    per_image = inception_preprocessing.distort_color(
        one * 0.5 + 0.5, 0, fast_mode=True) * 2.0 - 1.0
    batched = inception_preprocessing.distort_color_batch(tf.constant(batch))
    with tf1.Session() as session:
      reference = np.stack([session.run(per_image) for _ in range(400)])
      moved = session.run(batched)

  def statistics(images):
    chroma = lambda x: (x.max(-1) - x.min(-1)).mean(axis=(-1, -2))  # noqa: E731
    return dict(shift=images.mean(axis=(1, 2, 3)) - image.mean(),
                chroma_ratio=chroma(images) / chroma(image),
                **{'mean_%d' % c: images[..., c].mean(axis=(1, 2))
                   for c in range(3)})

  def p_values(a, b):
    sa, sb = statistics(a), statistics(b)
    return {k: scipy.stats.ks_2samp(sa[k], sb[k]).pvalue for k in sa}
  assert min(p_values(moved, reference).values()) > 1e-3, p_values(
      moved, reference)
  assert max(p_values(batch, reference).values()) < 1e-6
