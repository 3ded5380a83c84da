"""Exit statuses say what to do (docs/cluster.md "Exit statuses"): 0 done,
1 (any of 1-127) a permanent error that a restart repeats, 200 (any of
128-255, a signal's 128 + N among them) something a restart fixes. One table
(zoo_errors), the same for every script and task kind; the launcher restarts
on the retryable ones only. Every process started here has a timeout."""
import os
import re

import pytest
import tensorflow as tf

import zoo_errors
from deployment import cluster
from deployment import launch
import scripts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, 'train_image_classifier.py')
DOC = os.path.join(ROOT, 'docs', 'cluster.md')


def test_the_statuses_split_at_128_as_tfjobs_exit_code_policy_does():
  assert zoo_errors.DONE == 0
  assert 1 <= zoo_errors.PERMANENT <= 127
  assert 128 <= zoo_errors.RETRYABLE <= 255
  # not a signal's status: 128 + N for N up to 64 are
  assert zoo_errors.RETRYABLE > 128 + 64


@pytest.mark.parametrize('error, status', [
    (ValueError('bad flag'), zoo_errors.PERMANENT),
    (RuntimeError('something else'), zoo_errors.PERMANENT),
    (tf.errors.InvalidArgumentError(None, None, 'bad data'),
     zoo_errors.PERMANENT),
    (zoo_errors.Retryable('worker:1 is not running'), zoo_errors.RETRYABLE),
    (cluster.CannotStart('port 2222 is in use'), zoo_errors.RETRYABLE),
    (tf.errors.UnavailableError(None, None, 'Socket closed'),
     zoo_errors.RETRYABLE),
    (tf.errors.AbortedError(None, None, 'peer gone'), zoo_errors.RETRYABLE),
    (tf.errors.DeadlineExceededError(None, None, 'timed out'),
     zoo_errors.RETRYABLE),
    (tf.errors.InternalError(None, None, 'Connection reset by peer'),
     zoo_errors.RETRYABLE),
    (tf.errors.InternalError(None, None, 'an op failed'),
     zoo_errors.PERMANENT),
])
def test_an_error_gets_the_status_of_what_fixes_it(error, status):
  assert zoo_errors.exit_status(error) == status


def test_signals_and_the_retryable_status_restart_permanent_ones_do_not():
  assert [zoo_errors.is_retryable(s) for s in (0, 1, 2, 127)] == [False] * 4
  assert [zoo_errors.is_retryable(s) for s in (128, 130, 137, 143, 200, 255,
                                               -9)] == [True] * 7
  assert zoo_errors.status_meaning(137) == 'killed'
  assert zoo_errors.status_meaning(-9) == 'killed'
  assert zoo_errors.status_meaning(143) == 'stopped by SIGTERM'
  assert zoo_errors.status_meaning(1) == 'permanent error'


def test_the_docs_table_is_the_code_table():
  text = open(DOC).read()
  table = text[text.index('## Exit statuses'):]
  first_cells = re.findall(r'^\| ([\d, ]+) \|', table, re.M)
  statuses = {int(n) for cell in first_cells for n in re.findall(r'\d+', cell)}
  assert statuses == {zoo_errors.DONE, zoo_errors.PERMANENT,
                      zoo_errors.RETRYABLE, 130, 137, 143}, first_cells
  assert all(zoo_errors.is_retryable(s) for s in statuses - {0, 1})


def _train(*args, env=None):
  return scripts.run(TRAIN, *args, env=env, timeout=300)


def test_a_bad_flag_is_permanent(digits, tmp_path):
  result = _train('--dataset_name=digits', '--dataset_dir=%s' % digits,
                  '--model_name=lenett', '--train_dir=%s' % tmp_path)
  assert result.returncode == zoo_errors.PERMANENT, result.stderr[-2000:]
  lines = [l for l in result.stderr.splitlines() if 'error:' in l]
  assert lines == ["train_image_classifier: error: unknown model_name "
                   "'lenett'; did you mean 'lenet'? (known: " +
                   lines[0].split('(known: ')[1]], result.stderr[-2000:]


def test_the_launcher_never_restarts_a_permanent_error(digits, tmp_path):
  out = tmp_path / 'log'
  with open(out, 'w') as log:
    status = launch.run(0, 2, [TRAIN, '--dataset_name=digits',
                               '--dataset_dir=%s' % (tmp_path / 'none'),
                               '--model_name=lenet',
                               '--train_dir=%s' % tmp_path,
                               '--variable_update=collective_all_reduce'],
                        out=log, max_restarts=3, stop_grace_secs=10)
  text = out.read_text()
  assert status == zoo_errors.PERMANENT, text[-3000:]
  assert 'restart' not in text.replace('not restarted', '')
  assert re.search(r'^launch: worker:[01] exited 1 \(permanent error\); not '
                   r'restarted \(a permanent error\)$', text, re.M), text
