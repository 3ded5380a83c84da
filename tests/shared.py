"""What many tests build, built once per test run and shared by every worker.

`pytest -n 2` runs two worker processes, each with its own fixtures: a
module- or session-scoped fixture still builds once per worker and module.
`artifact(tmp_path_factory, name, build)` builds `name` once for the whole
run: the first worker to ask calls `build(directory)` while holding a lock
file, the others wait for it and get the same directory. A build that fails
leaves nothing behind (the next caller builds again and sees the same error).

Shared artifacts are read-only by convention: a test that changes files
(corrupts a shard, appends a checkpoint) copies the artifact first
(`copy_of`).
"""
import fcntl
import os
import shutil


def shared_root(tmp_path_factory):
  """The directory every worker of this run sees: under xdist, the parent of
  the workers' own base temporaries; without it, the base temporary."""
  base = tmp_path_factory.getbasetemp()
  root = base.parent if os.environ.get('PYTEST_XDIST_WORKER') else base
  root = root / 'shared'
  root.mkdir(exist_ok=True)
  return root


def artifact(tmp_path_factory, name, build):
  """The directory holding `name`, built by `build(directory)` once per run."""
  root = shared_root(tmp_path_factory)
  directory = root / name
  done = root / ('%s.done' % name)
  with open(root / ('%s.lock' % name), 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
      if not done.exists():
        shutil.rmtree(directory, ignore_errors=True)  # a failed build's rest
        directory.mkdir()
        try:
          build(str(directory))
        except BaseException:
          shutil.rmtree(directory, ignore_errors=True)
          raise
        done.touch()
    finally:
      fcntl.flock(lock, fcntl.LOCK_UN)
  return directory


def copy_of(source, destination):
  """A private copy of a shared artifact, for a test that changes it."""
  shutil.copytree(str(source), str(destination), symlinks=True)
  return destination
