"""Writes i3d.json and s3dg.json: the variables TF-Slim's video nets create.

No TF-Slim checkpoint of I3D or S3D-G was published, so these contracts are
derived by reading TF-Slim's code (tensorflow/models, research/slim/nets/
i3d.py, s3dg.py, i3d_utils.py, nets_factory.py; end-point shapes from
i3d_test.py and s3dg_test.py), written down here as rules and independent of
nets/s3dg.py. The facts used:
  - every convolution but the logits and the self-gating one is followed by
    slim.batch_norm without `scale` (beta, moving_mean, moving_variance; no
    biases, no gamma);
  - conv3d_spatiotemporal, when separable and its temporal size is not 1,
    is a [1, k, k] convolution under <scope> (with batch norm) and a
    [t, 1, 1] out->out convolution under <scope>/temporal with biases and no
    batch norm (s3dg_arg_scope sets separable=True; i3d_arg_scope does not);
    Conv2d_1a_7x7 is never separable;
  - the temporal size t of the 3x3 convolutions is 1 before
    temporal_conv_startat ('Conv2d_2c_3x3' in both) and 3 from it on;
  - self_gating (S3D-G: from gating_startat 'Conv2d_2c_3x3'; I3D: None) adds
    <scope>/self_gating/transformer_W/weights [1, 1, 1, c, c], no biases;
  - Inception modules: Branch_0/Conv2d_0a_1x1, Branch_{1,2}/Conv2d_0a_1x1 and
    Conv2d_0b_3x3, Branch_3/MaxPool_0a_3x3 then Conv2d_0b_1x1, gated per branch
    under the scope of the branch's last convolution;
  - the head: Logits/AvgPool_0a_7x7, Dropout_0b, Logits/Conv2d_0c_1x1
    (weights and biases), mean over time; num_classes defaults to 1000.
Run from the repository root: python tests/data/tf_slim_video_specs/derive_video_specs.py
"""
import json
import os

MODULES = [  # name, (0_0a, 1_0a, 1_0b, 2_0a, 2_0b, 3_0b) from s3dg_base
    ('Mixed_3b', (64, 96, 128, 16, 32, 32)),
    ('Mixed_3c', (128, 128, 192, 32, 96, 64)),
    ('Mixed_4b', (192, 96, 208, 16, 48, 64)),
    ('Mixed_4c', (160, 112, 224, 24, 64, 64)),
    ('Mixed_4d', (128, 128, 256, 24, 64, 64)),
    ('Mixed_4e', (112, 144, 288, 32, 64, 64)),
    ('Mixed_4f', (256, 160, 320, 32, 128, 128)),
    ('Mixed_5b', (256, 160, 320, 32, 128, 128)),
    ('Mixed_5c', (384, 192, 384, 48, 128, 128)),
]
# From i3d_test.py / s3dg_test.py (batch 5 there, 2 here), 64 frames, 224x224.
END_POINTS = {
    'Conv2d_1a_7x7': [2, 32, 112, 112, 64],
    'MaxPool_2a_3x3': [2, 32, 56, 56, 64],
    'Conv2d_2b_1x1': [2, 32, 56, 56, 64],
    'Conv2d_2c_3x3': [2, 32, 56, 56, 192],
    'MaxPool_3a_3x3': [2, 32, 28, 28, 192],
    'Mixed_3b': [2, 32, 28, 28, 256],
    'Mixed_3c': [2, 32, 28, 28, 480],
    'MaxPool_4a_3x3': [2, 16, 14, 14, 480],
    'Mixed_4b': [2, 16, 14, 14, 512],
    'Mixed_4c': [2, 16, 14, 14, 512],
    'Mixed_4d': [2, 16, 14, 14, 512],
    'Mixed_4e': [2, 16, 14, 14, 528],
    'Mixed_4f': [2, 16, 14, 14, 832],
    'MaxPool_5a_2x2': [2, 8, 7, 7, 832],
    'Mixed_5b': [2, 8, 7, 7, 832],
    'Mixed_5c': [2, 8, 7, 7, 1024],
    'Logits': [2, 1000],
    'Predictions': [2, 1000],
}


def derive(first_temporal, separable, gated, num_classes=1000):
  variables = []

  def add(name, shape):
    variables.append(['InceptionV1/' + name, list(shape), 'float32'])

  def conv_bn(scope, kernel, cin, cout):
    add(scope + '/weights', list(kernel) + [cin, cout])
    for v in ('beta', 'moving_mean', 'moving_variance'):
      add(scope + '/BatchNorm/' + v, [cout])

  def spatiotemporal(scope, t, k, cin, cout):
    if separable and t != 1:
      conv_bn(scope, [1, k, k], cin, cout)
      add(scope + '/temporal/weights', [t, 1, 1, cout, cout])
      add(scope + '/temporal/biases', [cout])
    else:
      conv_bn(scope, [t, k, k], cin, cout)

  def gate(scope, c):
    if gated:
      add(scope + '/self_gating/transformer_W/weights', [1, 1, 1, c, c])

  conv_bn('Conv2d_1a_7x7', [first_temporal, 7, 7], 3, 64)
  conv_bn('Conv2d_2b_1x1', [1, 1, 1], 64, 64)
  spatiotemporal('Conv2d_2c_3x3', 3, 3, 64, 192)
  gate('Conv2d_2c_3x3', 192)
  channels = 192
  for name, (b0, b1a, b1b, b2a, b2b, b3) in MODULES:
    conv_bn(name + '/Branch_0/Conv2d_0a_1x1', [1, 1, 1], channels, b0)
    gate(name + '/Branch_0/Conv2d_0a_1x1', b0)
    for branch, reduce, out in (('Branch_1', b1a, b1b), ('Branch_2', b2a, b2b)):
      conv_bn('%s/%s/Conv2d_0a_1x1' % (name, branch), [1, 1, 1], channels,
              reduce)
      spatiotemporal('%s/%s/Conv2d_0b_3x3' % (name, branch), 3, 3, reduce, out)
      gate('%s/%s/Conv2d_0b_3x3' % (name, branch), out)
    conv_bn(name + '/Branch_3/Conv2d_0b_1x1', [1, 1, 1], channels, b3)
    gate(name + '/Branch_3/Conv2d_0b_1x1', b3)
    channels = b0 + b1b + b2b + b3
  add('Logits/Conv2d_0c_1x1/weights', [1, 1, 1, channels, num_classes])
  add('Logits/Conv2d_0c_1x1/biases', [num_classes])
  return variables


SOURCE = ('derived from TF-Slim research/slim/nets/{i3d,s3dg,i3d_utils}.py '
          'by tests/data/tf_slim_video_specs/derive_video_specs.py')
SPECS = {
    'i3d': derive(first_temporal=7, separable=False, gated=False),
    's3dg': derive(first_temporal=3, separable=True, gated=True),
}

if __name__ == '__main__':
  here = os.path.dirname(os.path.abspath(__file__))
  for model_name, variables in SPECS.items():
    spec = {'model_name': model_name, 'source': SOURCE,
            'default_image_size': 224, 'num_frames': 64, 'num_classes': 1000,
            'variables': variables, 'end_points': END_POINTS,
            'logits_shape': [2, 1000]}
    with open(os.path.join(here, model_name + '.json'), 'w') as f:
      json.dump(spec, f, indent=1)
      f.write('\n')
    print(model_name, len(variables), 'variables')
