"""Trains a network of the zoo on a converted dataset (TF-Slim's flags).

    python train_image_classifier.py --dataset_name=digits --dataset_dir=data/digits \
        --model_name=lenet --train_dir=runs/lenet --max_number_of_steps=1000

One code path for one clone and for N (--num_clones, --clone_on_cpu,
--variable_update): the classification model_fn deploys clones with
model_deploy and the Estimator-compatible runner trains it, resuming from
train_dir's latest checkpoint. --checkpoint_path fine-tunes only when train_dir has none.
As in TF-Slim, --batch_size is per clone: a step takes batch_size x
num_clones images, and the learning-rate decay counts them all.

SIGTERM or SIGINT (a scheduler's preemption, Ctrl-C) ends the run after the
step in flight with a checkpoint at that step, the line `stopped by SIGTERM at
step N; checkpoint <path>` and exit status 128 + the signal's number (143,
130); the next run resumes there. Only one trainer may use a --train_dir at a
time (its trainer.lock); it resumes from the newest readable checkpoint.

Every --log_every_n_steps steps it prints `step N/max (p%): loss = x (y
images/sec; z images/step = c clones x b), ETA t`; TensorBoard summaries go
to train_dir (`tensorboard --logdir` it, see README "Watching training"),
and training.json, how the checkpoints were trained, which evaluation,
export and classification read.
"""
import os
import sys

from absl import app
from absl import flags

import quiet_tensorflow  # noqa: F401  (first: TensorFlow's noise off the terminal)
import tf_compat  # noqa: F401
import zoo_errors
import tensorflow as tf

from classification import classifier
from classification import fine_tuning
from classification import precise_bn
from classification import progress
from classification import training_record
from datasets import dataset_factory
from deployment import cluster
from deployment import model_deploy
from deployment import slurm
from runner import estimator as est
from runner import faults
import script_flags

F = flags.FLAGS

script_flags.define_shared_flags(batch_size=32, dataset_split_name='train',
                                 image_size_flag='train_image_size',
                                 labels_offset=0)
script_flags.define_training_flags()
flags.DEFINE_string('train_dir', '/tmp/tfmodel/',
                    'Directory for checkpoints and event logs.')
flags.DEFINE_integer('max_number_of_steps', None, 'Steps to train in all.')
flags.DEFINE_integer('save_summaries_secs', 600, 'Seconds between summaries.')
flags.DEFINE_integer('save_summaries_steps', None,
                     'Steps between summaries (instead of seconds).')
flags.DEFINE_integer('save_interval_secs', 600, 'Seconds between checkpoints.')
flags.DEFINE_integer('save_interval_steps', None,
                     'Steps between checkpoints (instead of seconds).')
flags.DEFINE_integer('random_seed', None, 'Graph-level random seed.')
flags.DEFINE_integer('quantize_delay', -1,
                     'Number of steps to start quantized training. Set to -1 '
                     'would disable quantized training (TF-Slim\'s flag: the '
                     'graph is rewritten as tf.contrib.quantize rewrote it, '
                     'quantization/).')
flags.DEFINE_enum('variable_update', 'parameter_server',
                  list(model_deploy.VARIABLE_UPDATES),
                  'parameter_server (one copy of the variables, gradients '
                  'summed there), replicated (with --num_clones > 1: a copy '
                  'per clone, gradients all-reduced) or collective_all_reduce '
                  '(a cluster without ps tasks: every worker keeps the '
                  'variables, gradients of all workers all-reduced; see '
                  'README).')
flags.DEFINE_float('collective_timeout_secs',
                   model_deploy.COLLECTIVE_TIMEOUT_SECS,
                   'collective_all_reduce: seconds a step (or the start) '
                   'waits for the other workers before this task stops.')
# Fine-tuning (and --ignore_missing_vars, from ClassifierParams).
flags.DEFINE_string('checkpoint_path', None,
                    'Checkpoint (file or directory) to fine-tune from.')
flags.DEFINE_string('checkpoint_exclude_scopes', None,
                    'Comma-separated scopes not restored from checkpoint_path.')
flags.DEFINE_string('trainable_scopes', None,
                    'Comma-separated scopes to train (default: all).')
# The cluster: these, or TF_CONFIG (see README "Training on a cluster").
flags.DEFINE_string('master', '', 'Session target of servers started '
                    'elsewhere (with --num_ps_tasks/--worker_replicas).')
flags.DEFINE_integer('worker_replicas', 1, 'Number of worker replicas.')
flags.DEFINE_integer('num_ps_tasks', 0, 'Parameter servers (0: local); '
                     'with Slurm, how many of its tasks serve as ps.')
flags.DEFINE_integer('task', 0, 'Task id of this replica.')
flags.DEFINE_string('ps_hosts', '', 'Comma-separated host:port of the ps.')
flags.DEFINE_string('worker_hosts', '',
                    'Comma-separated host:port of the workers (0: chief).')
flags.DEFINE_string('job_name', '', 'This task\'s job: ps or worker.')
flags.DEFINE_enum('cluster_from', 'auto', list(cluster.SOURCES),
                  'Where the cluster is read from: flags (--ps_hosts, '
                  '--worker_hosts, --job_name, --task), tf_config (TF_CONFIG) '
                  'or slurm (the variables srun sets: SLURM_PROCID, '
                  'SLURM_NTASKS, SLURM_STEP_NODELIST, '
                  'SLURM_STEP_TASKS_PER_NODE; --num_ps_tasks of the tasks '
                  'serve as ps). auto: the host flags when given, else '
                  'TF_CONFIG when set, else Slurm\'s variables in an srun '
                  'step of several tasks.')
flags.DEFINE_integer('peer_timeout_secs', 180,
                     'A cluster task waits this long for a lost ps, chief '
                     '(or, with --sync_replicas, worker) to come back, then '
                     'ends with status 200.')
flags.DEFINE_integer('max_starts_without_progress', 5,
                     'The chief refuses to start (status 1) when this many '
                     'starts in a row ended at the same step: a crash loop. '
                     '0: no limit.')
flags.DEFINE_integer(
    'precise_bn_batches', 0,
    'After the last step (or on a run already at it): this many training '
    'batches go through the network with the weights fixed, and every '
    'batch-norm layer\'s moving mean and variance become the averages of '
    'their statistics; the final checkpoint is rewritten at its step. '
    'Evaluating an early checkpoint needs it: the moving statistics leave '
    'their initial values at 1 - decay per step (0: off).')
flags.DEFINE_integer('slurm_base_port', slurm.DEFAULT_BASE_PORT,
                     'Slurm: a task listens on this port + its place among '
                     'the tasks of its node.')


def task_cluster():
  return cluster.Cluster.from_flags(
      F.ps_hosts, F.worker_hosts, F.job_name, F.task, master=F.master,
      num_ps_tasks=F.num_ps_tasks, worker_replicas=F.worker_replicas,
      source=F.cluster_from, slurm_base_port=F.slurm_base_port)


def check_train_dir(path):
  if os.path.exists(path) and not os.path.isdir(path):
    raise ValueError("--train_dir '%s' is a file, not a directory" % path)


def build_estimator(dataset, task):
  check_train_dir(F.train_dir)
  deployment = model_deploy.DeploymentConfig(
      num_clones=F.num_clones, clone_on_cpu=F.clone_on_cpu,
      variable_update=F.variable_update,
      collective_timeout_secs=F.collective_timeout_secs,
      exact=True).for_task(task)
  deployment.check_devices_available()
  params = classifier.ClassifierParams(
      model_name=F.model_name,
      num_classes=dataset.num_classes - F.labels_offset,
      num_samples_per_epoch=dataset.num_samples, batch_size=F.batch_size,
      trainable_scopes=script_flags.split_scopes(F.trainable_scopes),
      checkpoint_path=F.checkpoint_path,
      checkpoint_exclude_scopes=script_flags.split_scopes(
          F.checkpoint_exclude_scopes),
      optimizer=script_flags.optimizer_params(), deployment=deployment,
      max_steps=F.max_number_of_steps, precision=F.precision,
      quantize_delay=F.quantize_delay,
      # --weight_decay, --label_smoothing, --moving_average_decay, ...
      **script_flags.params_from_flags(classifier.ClassifierParams))
  params.optimizer.validate()
  for line in params.optimizer.warnings():
    print('train_image_classifier: warning: %s' % line, file=sys.stderr)
  if F.checkpoint_path:
    fine_tuning.resolve_checkpoint(F.checkpoint_path)
  script_flags.check_flags(at_least_one=['save_summaries_steps',
                                         'save_interval_steps'])
  if F['save_interval_secs'].present and F.save_interval_steps is not None:
    raise ValueError('set at most one of --save_interval_secs and '
                     '--save_interval_steps')
  config = est.RunConfig(
      model_dir=F.train_dir, tf_random_seed=F.random_seed,
      save_summary_steps=F.save_summaries_steps,
      save_summaries_secs=(None if F.save_summaries_steps
                           else F.save_summaries_secs),
      save_checkpoints_secs=(None if F.save_interval_steps
                             else F.save_interval_secs),
      save_checkpoints_steps=F.save_interval_steps,
      log_step_count_steps=None,  # the model_fn's ProgressHook logs
      session_config=script_flags.session_config(), cluster=task,
      peer_timeout_secs=F.peer_timeout_secs,
      max_starts_without_progress=F.max_starts_without_progress)
  return est.Estimator(classifier.model_fn, F.train_dir, config=config,
                       params={'classifier': params},
                       report=progress.print_now)


def how_trained(dataset):
  """The training record (classification/training_record.py) of this run:
  what eval, export and classify take from the train_dir by default."""
  info = classifier.image_network_info(F.model_name)
  return dict(
      model_name=F.model_name,
      image_size=F.train_image_size or info.default_image_size,
      preprocessing_name=F.preprocessing_name or info.preprocessing_name,
      use_grayscale=F.use_grayscale,
      num_classes=dataset.num_classes - F.labels_offset,
      labels_offset=F.labels_offset, dataset_name=F.dataset_name,
      moving_average_decay=F.moving_average_decay,
      quantize_delay=F.quantize_delay if F.quantize_delay >= 0 else None,
      dataset_dir=(F.dataset_dir if '://' in F.dataset_dir
                   else os.path.abspath(F.dataset_dir)))


def main(_):
  tf.compat.v1.disable_eager_execution()  # a TF 1 program: graph mode
  try:
    task = task_cluster()
    if task.task_type == 'ps':  # until SIGTERM or SIGINT
      return est.serve_parameters(task, script_flags.session_config(),
                                  F.peer_timeout_secs, progress.print_now)
    if task.task_type == 'evaluator':
      raise ValueError('an evaluator task does not train: run '
                       'eval_image_classifier.py --wait_for_checkpoints')
    classifier.image_network_info(F.model_name)
    # Before anything reads the train_dir: a bad count is refused whatever
    # checkpoint is there.
    script_flags.check_flags(required=['dataset_dir'],
                             at_least_one=['max_number_of_steps'])
    if F.precise_bn_batches < 0:
      raise ValueError('--precise_bn_batches must be 0 (off) or more, got %d'
                       % F.precise_bn_batches)
    script_flags.expand_paths('train_dir', 'dataset_dir', 'checkpoint_path')
    dataset = dataset_factory.get_dataset(F.dataset_name, F.dataset_split_name,
                                          F.dataset_dir)
    dataset.check_files()  # before anything starts: the records are sound
    estimator = build_estimator(dataset, task)
    input_fn = classifier.make_input_fn(
        dataset, F.model_name, F.batch_size * F.num_clones, is_training=True,
        distort_colors=not F.distort_colors_after_batching,
        **script_flags.input_args())
    resumed = estimator.latest_checkpoint()
    resumed_step = est.global_step_of(resumed) if resumed else 0
    if (resumed and F.max_number_of_steps is not None and
        resumed_step >= F.max_number_of_steps):
      if F.precise_bn_batches and estimator.config.is_chief:
        # How an existing run gets exact statistics: the same command again.
        status = recompute_batch_norm(estimator, dataset, input_fn)
        if status:
          return status
      else:
        print('%s is already at step %d (--max_number_of_steps=%d): nothing '
              'to train; raise --max_number_of_steps or pass another '
              '--train_dir' % (F.train_dir, resumed_step,
                               F.max_number_of_steps), flush=True)
      estimator.end_finished_job()  # a ps still waiting ends, and its workers
      return 0
    sys.stdout.flush()  # the runner says which checkpoint it resumes from
    record = how_trained(dataset)
    hooks = []
    if resumed:  # a Saver restores misfit shapes, and the first matmul fails
      hooks.append(fine_tuning.CheckpointFitHook(
          lambda: estimator.resumed_from, num_classes=record['num_classes'],
          image_size=record['image_size'], size_flag='--train_image_size'))
    estimator.train(input_fn, max_steps=F.max_number_of_steps, hooks=hooks,
                    saving_listeners=[training_record.RecordWriter(
                        F.train_dir, record, resumed_step)])
  except faults.Stopped as e:
    progress.print_now(str(e))
    return e.exit_status
  except faults.Diverged as e:
    print('train_image_classifier: error: %s; try a lower --learning_rate '
          '(it was %g)' % (e, F.learning_rate), file=sys.stderr)
    return zoo_errors.PERMANENT
  except (ValueError, RuntimeError, faults.DiskFull, tf.errors.OpError) as e:
    print('train_image_classifier: error: %s' % zoo_errors.one_line(e),
          file=sys.stderr)
    return zoo_errors.exit_status(e)  # RETRYABLE when a restart fixes it
  chance = progress.chance_level_at_end()
  if chance:
    # A model at chance has not learnt: the last line says so, not "Trained".
    print('train_image_classifier: error: %s (it was %g); the last '
          'checkpoint, %s, holds a model at chance level' % (
              chance, F.learning_rate, estimator.latest_checkpoint()),
          file=sys.stderr)
    return zoo_errors.PERMANENT
  if F.precise_bn_batches and estimator.config.is_chief:
    try:
      status = recompute_batch_norm(estimator, dataset, input_fn)
      if status:
        return status
    except (ValueError, tf.errors.OpError) as e:
      print('train_image_classifier: error: %s' % zoo_errors.one_line(e),
            file=sys.stderr)
      return zoo_errors.PERMANENT
  print(last_line(estimator, task))
  return zoo_errors.DONE


def recompute_batch_norm(estimator, dataset, input_fn):
  """--precise_bn_batches on the latest checkpoint (the chief's: in a
  cluster the workers have stopped stepping; it reads and writes train_dir).
  Returns 0, or the exit status of a signal that stopped it."""
  checkpoint = estimator.latest_checkpoint()
  progress.print_now('Precise batch norm: %d batches of %d images through %s'
                     % (F.precise_bn_batches, F.batch_size * F.num_clones,
                        checkpoint))
  try:
    with faults.StopSignals() as signals:  # SIGTERM: stop between batches
      result = precise_bn.recompute(
          checkpoint, F.model_name, dataset.num_classes - F.labels_offset,
          input_fn, F.precise_bn_batches, num_clones=F.num_clones,
          session_config=script_flags.session_config(),
          stopped=lambda: signals.received)
  except faults.Stopped as e:
    progress.print_now('%s (precise batch norm not done: the checkpoint is '
                       'as training left it)' % e)
    return e.exit_status
  progress.print_now(result.line())
  return 0


def last_line(estimator, task):
  """What this task did: the chief trained and saved; another worker
  trained with it and saved nothing."""
  checkpoint = estimator.latest_checkpoint()
  if estimator.config.is_chief:
    return 'Trained to step %d; checkpoint %s' % (
        est.global_step_of(checkpoint), checkpoint)
  return ('%s:%d ran %d training steps; the chief saves the checkpoints '
          '(latest when this task stopped: %s)' % (
              task.task_type, task.task_id, estimator.steps_run, checkpoint))


if __name__ == '__main__':
  script_flags.use_grouped_help()
  app.run(lambda argv: sys.exit(main(argv)))
