"""How the runner makes a training task's session, and makes it again when
MonitoredSession recovers from a lost peer: the chief's, a worker's, a
collective worker's."""
import os

import tensorflow as tf

import tf_compat  # noqa: F401
from runner import faults

tf1 = tf.compat.v1


class ChiefSessionCreator(tf1.train.SessionCreator):
  """The chief's session. The first restores `resume` (the newest readable
  checkpoint, chosen when training started) or initialises. Every later one
  (MonitoredSession makes a new session when a ps or a connection is lost)
  first asks the parameter servers which variables they lost: none (a
  connection broke, the values are intact): it goes on; some (a ps came back
  empty at the same address, as Kubernetes restarts a pod): it restores the
  newest readable checkpoint at that moment (initialises only when there is
  none), so the global step and the checkpoints never go back. One line
  per recovery, through `report`. TensorFlow's ChiefSessionCreator restored
  the checkpoint chosen at the start, or none: the job carried on from
  step 0 with fresh weights and its next checkpoints pushed the trained ones
  out."""

  def __init__(self, scaffold, master, config, model_dir, resume,
               task_name=lambda device: device, last_step=lambda: 0,
               report=print):
    self._scaffold, self._master, self._config = scaffold, master, config
    self._model_dir, self._resume = model_dir, resume
    self._task_name, self._last_step, self._report = (task_name, last_step,
                                                      report)
    self._keep_values = tf.no_op(name='keep_the_variables')
    self._devices = {v.op.name: v.device for v in tf1.global_variables()}
    self.session = None  # the newest raw session (the TaskWatch saves with it)
    self.created = 0

  def create_session(self):
    scaffold = self._scaffold
    scaffold.finalize()
    init_op, init_fn, checkpoint = scaffold.init_op, scaffold.init_fn, None
    if not self.created:
      checkpoint = self._resume
    else:
      lost = self._lost_tasks()
      step = self._last_step()
      if not lost:
        init_op, init_fn = self._keep_values, None
        self._report('reconnected at step %d; the parameter servers kept '
                     'the variables' % step)
      else:
        checkpoint = faults.newest_readable_checkpoint(self._model_dir,
                                                       self._report)
        self._report('%s came back empty at step %d; %s' % (
            ', '.join(lost), step,
            'restored %s' % os.path.basename(checkpoint) if checkpoint else
            'no checkpoint yet: initialising the model'))
    manager = tf1.train.SessionManager(
        local_init_op=scaffold.local_init_op,
        local_init_feed_dict=scaffold.local_init_feed_dict,
        ready_op=scaffold.ready_op,
        ready_for_local_init_op=scaffold.ready_for_local_init_op,
        graph=tf1.get_default_graph())
    self.session = manager.prepare_session(
        self._master, saver=scaffold.saver,
        checkpoint_filename_with_path=checkpoint, config=self._config,
        init_op=init_op, init_feed_dict=scaffold.init_feed_dict,
        init_fn=init_fn)  # Scaffold has already bound itself to its init_fn
    self.created += 1
    return self.session

  def _lost_tasks(self):
    """The tasks (ps) holding variables that are no longer initialised."""
    with tf1.Session(self._master, config=self._config) as probe:
      missing = probe.run(self._scaffold.ready_op)
    return sorted({self._task_name(self._devices.get(name.decode(), ''))
                   for name in missing})


class WorkerSessionCreator(tf1.train.SessionCreator):
  """A non-chief worker's session, once the chief has initialised the
  variables. tf.compat.v1.train.WorkerSessionCreator checks every 30 s (its
  SessionManager's default recovery_wait_secs): a worker that starts a
  moment before the chief idles 30 s, a short job's whole run. This one
  checks every `poll_secs`."""

  def __init__(self, scaffold, master, config, poll_secs=1.0,
               last_step=lambda: 0, report=print):
    self._scaffold, self._master, self._config = scaffold, master, config
    self._poll_secs = poll_secs
    self._last_step, self._report = last_step, report
    self._global_step = tf1.train.get_global_step()
    self.session = None
    self.created = 0

  def create_session(self):
    self._scaffold.finalize()
    manager = tf1.train.SessionManager(
        local_init_op=self._scaffold.local_init_op,
        local_init_feed_dict=self._scaffold.local_init_feed_dict,
        ready_op=self._scaffold.ready_op,
        ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
        graph=tf1.get_default_graph(), recovery_wait_secs=self._poll_secs)
    lost_at = self._last_step()
    self.session = manager.wait_for_session(
        self._master, config=self._config, max_wait_secs=7200)
    if self.created:
      self._report('lost the session at step %d; going on from step %d, '
                   'with the chief\'s variables' % (
                       lost_at, self.session.run(self._global_step)))
    self.created += 1
    return self.session


class CollectiveSessionCreator(tf1.train.SessionCreator):
  """A session of a collective_all_reduce worker: the chief restores
  `checkpoint` (the newest readable one) or runs the initialisers; then
  every worker runs `broadcast` (the chief's values to all; it waits for
  every worker to be there), then the local initialisers (the clones'
  copies read the broadcast values), and checks the model is ready."""

  def __init__(self, scaffold, master, config, broadcast, is_chief, checkpoint,
               options=None):
    self._scaffold, self._master, self._config = scaffold, master, config
    self._options = options  # the broadcast's RunOptions (its deadline)
    self._broadcast, self._is_chief = broadcast, is_chief
    self._checkpoint = checkpoint
    self._created = False
    self.session = None

  def create_session(self):
    if self._created:
      # MonitoredSession recovers from UnavailableError/AbortedError by
      # making a new session; after a peer failed, TensorFlow aborts this
      # process's collective executor for good ("Restart your program to
      # reset"), so the new session would fail its first step forever.
      raise LostWorker()
    self._created = True
    scaffold = self._scaffold
    scaffold.finalize()
    session = self.session = tf1.Session(self._master, config=self._config)
    if self._is_chief:
      if self._checkpoint:
        scaffold.saver.restore(session, self._checkpoint)
      else:
        session.run(scaffold.init_op, feed_dict=scaffold.init_feed_dict)
        if scaffold.init_fn:
          scaffold.init_fn(session)
    session.run(self._broadcast, options=self._options)
    session.run(scaffold.local_init_op,
                feed_dict=scaffold.local_init_feed_dict)
    missing = session.run(scaffold.ready_op)
    if missing.size:
      raise RuntimeError('after the broadcast from the chief, variable(s) '
                         'are not initialised: %s' % ', '.join(
                             m.decode() for m in missing[:5]))
    return session


class LostWorker(RuntimeError):
  """A collective failed because a peer stopped or lost its connection."""


def collective_failure_message(deployment, cluster, step, timed_out):
  """One line for a collective all-reduce that failed. Whether TensorFlow
  reports a dead peer as a lost connection or as a timeout depends on the
  moment it died, so the peers are probed and the ones down are named."""
  down = cluster.unreachable_peers()
  if down:
    return ('%s of the collective all-reduce %s not running (%s address '
            'refuses connections); this task stops too: restart every task '
            'to resume from the last checkpoint (step %d)' % (
                ', '.join(down), 'is' if len(down) == 1 else 'are',
                'its' if len(down) == 1 else 'their', step))
  if timed_out:
    return ('a collective all-reduce waited more than %gs for the other '
            'workers (last checkpoint: step %d): a worker stopped, hangs or '
            'has not started; this task stops (--collective_timeout_secs)' % (
                deployment.collective_timeout_secs, step))
  return ('a worker of the collective all-reduce stopped or lost its '
          'connection; this task stops too: restart every task to resume '
          'from the last checkpoint (step %d)' % step)
