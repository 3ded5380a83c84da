"""The short form of tests/chaos.py, for CI: under `deployment.launch
--max_restarts`, a random task (the chief at least once) of a 1 ps + 2 workers
job and of a 2-worker collective job is SIGKILLed at random moments twice;
each job ends at --max_number_of_steps with status 0, every checkpoint left
reads back whole, the latest checkpoint never goes back, each restart resumes
from it, and the model evaluates within 3 points of an undisturbed run. The
`pods` layout is the ps job the way Kubernetes runs it, without the launcher:
the ps is killed and started again alone at its address (the chief restores
its newest checkpoint), then the chief; the ps and the worker end by
themselves with 0 after the chief. The long form: `python tests/chaos.py
--kills=10` (docs/cluster.md)."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests'))
import chaos  # noqa: E402
from benchmarks import task_resources  # noqa: E402

STEPS, KILLS = 150, 2


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize('layout', ['ps', 'collective', 'pods'])
def test_a_job_killed_at_random_heals_and_ends_as_an_undisturbed_one(
    layout, digits, tmp_path):
  seed = int(os.environ.get('CHAOS_SEED', '3'))
  accuracy = {}
  for kind, kills in (('undisturbed', 0), ('chaos', KILLS)):
    train_dir = tmp_path / kind
    log_path = tmp_path / ('%s.log' % kind)
    # The undisturbed launcher job: no task's threads or memory grow with
    # the steps (benchmarks/task_resources.py).
    sampler = (task_resources.sample_launcher(log_path, chaos.CHIEF_STEP)
               if not kills and layout != 'pods' else None)
    try:
      status, log, made, seen = chaos.run_job(
          digits, train_dir, STEPS, layout, kills, max_delay=1.2, seed=seed,
          timeout=400, log_path=str(log_path))
    finally:
      if sampler:
        sampler.stop()
    if sampler:
      print(sampler.table())
      tasks = ['worker:0', 'worker:1'] + (['ps:0'] if layout == 'ps' else [])
      problems = sampler.problems(
          STEPS, names=tasks,
          max_rss_growth=task_resources.SHORT_RUN_RSS_GROWTH)
      assert not problems, '%s\n%s' % (problems, sampler.table())
    problems, final, restarts = chaos.check(layout, status, log, made, seen,
                                            train_dir, STEPS)
    print('%s %s: kills (task, latest checkpoint step) %s, restarts %s, '
          'final step %d' % (layout, kind, [(n, s) for _, n, s in made],
                             restarts, final))
    assert not problems, '%s\n%s' % (problems, log[-4000:])
    assert len(made) == kills and len(restarts) == kills, log[-4000:]
    accuracy[kind] = chaos.accuracy(digits, train_dir)
  assert 'worker:0' in [n for _, n, _ in made]  # the chief was killed
  if layout == 'pods':  # the ps first, started again at its own address
    assert made[0][1] == 'ps:0'
    assert len(chaos.RECOVERED.findall(log)) == 1, log[-4000:]
    assert [n for n, _ in chaos.ENDED.findall(log)] == ['ps:0', 'worker:1']
  assert abs(accuracy['chaos'] - accuracy['undisturbed']) <= 0.03, accuracy
