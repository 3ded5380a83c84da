"""The shared classifier head keeps each network's TF-Slim names.

Exported graphs are read by op name ('InceptionV1/Logits/Predictions/...',
'MobilenetV1/Predictions/...'), and end points are tapped by name, so the
head that Inception v1-v3 and MobileNet v1 now share must build, per
network, what each built on its own (the video networks' head is checked
against TF-Slim's in test_tf_slim_paths.py). Graph construction only.
"""
import pytest
import tensorflow as tf

from nets import inception_v1
from nets import inception_v2
from nets import mobilenet_v1

tf1 = tf.compat.v1

# network, input shape, its head's end points in order, the op name of its
# pool, the scope of its predictions op.
HEADS = [
    (inception_v1.inception_v1, [1, 224, 224, 3],
     ['AvgPool_0a_7x7', 'Logits', 'Predictions'],
     'InceptionV1/Logits/AvgPool_0a_7x7/AvgPool', 'InceptionV1/Logits/'),
    # Inception v2/v3 name the pool after the kernel used, shrunk here.
    (inception_v2.inception_v2, [1, 64, 64, 3],
     ['AvgPool_1a', 'PreLogits', 'Logits', 'Predictions'],
     'InceptionV2/Logits/AvgPool_1a_2x2/AvgPool', 'InceptionV2/'),
    (mobilenet_v1.mobilenet_v1, [1, 64, 64, 3],
     ['AvgPool_1a', 'Logits', 'Predictions'],
     'MobilenetV1/Logits/AvgPool_1a/AvgPool', 'MobilenetV1/'),
]


@pytest.mark.parametrize('network,shape,end_points,pool_op,predictions_scope',
                         HEADS, ids=[h[0].__name__ for h in HEADS])
def test_head_end_points_and_op_names_are_tf_slims(
    network, shape, end_points, pool_op, predictions_scope):
  with tf.Graph().as_default():
    logits, built = network(tf1.placeholder(tf.float32, shape), num_classes=5,
                            is_training=False)
  assert list(built)[-len(end_points):] == end_points
  assert built[end_points[0]].op.name == pool_op
  assert built['Predictions'].op.name.startswith(
      predictions_scope + 'Predictions/')
  assert logits.shape.as_list() == [1, 5]
