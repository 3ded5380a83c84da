"""TF-Slim's optimizers and learning-rate schedules, and the variables a
run trains.

`OptimizerParams` is the one place their defaults and help are written: the
training script's flags are generated from its fields (the top-level
script_flags.py).
"""
import dataclasses

import tensorflow as tf

import tf_compat  # noqa: F401
import zoo_errors

tf1 = tf.compat.v1

OPTIMIZERS = ('adadelta', 'adagrad', 'adam', 'ftrl', 'momentum', 'rmsprop',
              'sgd')
DECAY_TYPES = ('exponential', 'fixed', 'polynomial')


def flag_field(default, help_text):
  """A dataclass field that is also a script flag of the same name, default
  and help (script_flags.define_flags_of generates it)."""
  return dataclasses.field(default=default, metadata={'help': help_text})


@dataclasses.dataclass
class OptimizerParams:
  """TF-Slim's optimizer and learning-rate flags, with their defaults."""
  optimizer: str = flag_field('rmsprop', ', '.join(OPTIMIZERS))
  learning_rate: float = flag_field(0.01, 'Initial learning rate.')
  end_learning_rate: float = flag_field(0.0001, 'Polynomial decay end value.')
  learning_rate_decay_type: str = flag_field('exponential',
                                             ', '.join(DECAY_TYPES))
  learning_rate_decay_factor: float = flag_field(0.94, 'Decay factor.')
  num_epochs_per_decay: float = flag_field(2.0, 'Epochs between decays.')
  adadelta_rho: float = flag_field(0.95, 'Adadelta decay rate.')
  adagrad_initial_accumulator_value: float = flag_field(
      0.1, 'Adagrad accumulator start.')
  adam_beta1: float = flag_field(0.9, 'Adam 1st moment decay.')
  adam_beta2: float = flag_field(0.999, 'Adam 2nd moment decay.')
  opt_epsilon: float = flag_field(1.0, 'Epsilon of adadelta/adam/rmsprop.')
  ftrl_learning_rate_power: float = flag_field(-0.5, 'FTRL power.')
  ftrl_initial_accumulator_value: float = flag_field(0.1, 'FTRL accumulator.')
  ftrl_l1: float = flag_field(0.0, 'FTRL L1 strength.')
  ftrl_l2: float = flag_field(0.0, 'FTRL L2 strength.')
  momentum: float = flag_field(0.9, 'Momentum of the momentum optimizer.')
  rmsprop_momentum: float = flag_field(0.9, 'RMSProp momentum.')
  rmsprop_decay: float = flag_field(0.9, 'RMSProp decay.')
  sync_replicas: bool = flag_field(False, 'Synchronize replicas (cluster).')
  replicas_to_aggregate: int = flag_field(
      1, 'Gradients to collect before an update (cluster).')

  def validate(self):
    if self.replicas_to_aggregate < 1:
      raise ValueError('--replicas_to_aggregate must be at least 1, got %d' %
                       self.replicas_to_aggregate)
    if self.optimizer not in OPTIMIZERS:
      raise ValueError(zoo_errors.unknown_name_message(
          'optimizer', self.optimizer, OPTIMIZERS))
    if self.learning_rate_decay_type not in DECAY_TYPES:
      raise ValueError(zoo_errors.unknown_name_message(
          'learning_rate_decay_type', self.learning_rate_decay_type,
          DECAY_TYPES))


  def warnings(self):
    """Lines about settings that are valid but likely not meant: TF-Slim's
    --opt_epsilon default 1.0 (kept: its Inception recipes use it with
    RMSProp) divides small gradients' steps down to almost nothing with Adam
    and RMSProp, whose usual epsilons are 1e-8 and 1e-10."""
    if (self.optimizer in ('adam', 'rmsprop') and
        self.opt_epsilon >= LARGE_EPSILON):
      return ['--opt_epsilon=%g is large for --optimizer=%s: a step is about '
              'learning_rate x gradient / (sqrt(mean squared gradient) + '
              'epsilon), so small gradients barely move the weights (TF-Slim\'s '
              'default, used by its Inception recipes with RMSProp; %s usually '
              'takes --opt_epsilon=%s)' % (
                  self.opt_epsilon, self.optimizer, self.optimizer,
                  '1e-8' if self.optimizer == 'adam' else '1e-10')]
    return []


# An --opt_epsilon from which warnings() speaks up.
LARGE_EPSILON = 0.1


def configure_learning_rate(p, num_samples_per_epoch, images_per_step,
                            global_step):
  """TF-Slim's schedules. Decay steps count global steps of
  `images_per_step` images (all clones and aggregated replicas: TF-Slim
  divided by the batch of one clone only, so N clones decayed N times late)."""
  decay_steps = int(num_samples_per_epoch * p.num_epochs_per_decay /
                    images_per_step)
  decay_steps = max(decay_steps, 1)
  if p.learning_rate_decay_type == 'exponential':
    return tf1.train.exponential_decay(
        p.learning_rate, global_step, decay_steps,
        p.learning_rate_decay_factor, staircase=True,
        name='exponential_decay_learning_rate')
  if p.learning_rate_decay_type == 'fixed':
    return tf.constant(p.learning_rate, name='fixed_learning_rate')
  return tf1.train.polynomial_decay(
      p.learning_rate, global_step, decay_steps, p.end_learning_rate,
      power=1.0, cycle=False, name='polynomial_decay_learning_rate')


def configure_optimizer(p, learning_rate):
  train = tf1.train
  makers = {
      'adadelta': lambda: train.AdadeltaOptimizer(
          learning_rate, rho=p.adadelta_rho, epsilon=p.opt_epsilon),
      'adagrad': lambda: train.AdagradOptimizer(
          learning_rate,
          initial_accumulator_value=p.adagrad_initial_accumulator_value),
      'adam': lambda: train.AdamOptimizer(
          learning_rate, beta1=p.adam_beta1, beta2=p.adam_beta2,
          epsilon=p.opt_epsilon),
      'ftrl': lambda: train.FtrlOptimizer(
          learning_rate, learning_rate_power=p.ftrl_learning_rate_power,
          initial_accumulator_value=p.ftrl_initial_accumulator_value,
          l1_regularization_strength=p.ftrl_l1,
          l2_regularization_strength=p.ftrl_l2),
      'momentum': lambda: train.MomentumOptimizer(
          learning_rate, momentum=p.momentum, name='Momentum'),
      'rmsprop': lambda: train.RMSPropOptimizer(
          learning_rate, decay=p.rmsprop_decay, momentum=p.rmsprop_momentum,
          epsilon=p.opt_epsilon),
      'sgd': lambda: train.GradientDescentOptimizer(learning_rate),
  }
  p.validate()
  return makers[p.optimizer]()


def variables_to_train(trainable_scopes):
  if not trainable_scopes:
    return tf1.trainable_variables()
  chosen = []
  for scope in trainable_scopes:
    found = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, scope)
    if not found:
      raise ValueError("--trainable_scopes: scope '%s' matches no trainable "
                       'variable' % scope)
    chosen.extend(found)
  return chosen
