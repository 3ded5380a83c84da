"""A private single-node Slurm for the tests: its own munged, slurmctld and
slurmd on 127.0.0.1, everything (configuration, keys, state, spool, pid
files, logs) in one directory, on ports found free, so that two test
processes can each run one at the same time. Up in about a second.

    cluster = SlurmCluster(directory)
    cluster.start()                  # or pytest.skip / fail: why_unavailable()
    cluster.run('sbatch', ...)       # every client command gets SLURM_CONF
    cluster.job(job_id)              # scontrol show job -o, as a dict
    cluster.stop()                   # scancel, the daemons and what they left

The node is `localhost` (NodeAddr 127.0.0.1), so the host names Slurm hands
the tasks (SLURM_STEP_NODELIST) resolve: a task listens where the others
look for it. It claims 4 CPUs whatever the machine has
(SlurmdParameters=config_overrides), so 3-4 tasks run on 2 cores. No cgroups
(proctrack/linuxproc, task/none), no accounting: a finished job stays in
`scontrol show job` for MinJobAge (10 minutes). A requeued job waits
cred_expire (Slurm's default 120s; 10s here) before it may start again, and
the scheduler runs every 2s instead of every 60s. With that short wait,
MessageTimeout must exceed KillWait (30s): slurmd answers slurmctld's
request to end a job only once the job's processes are gone, after up to
KillWait; at the default 10s slurmctld gives up waiting and sends the request
again a minute later, which then ends the requeued job's next run (Slurm's
120s wait outlasts that retry).

Needs root (slurmd starts the jobs as their users) and Debian's slurm-wlm
and munge (`.ci/run` installs them as root).
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import time

SBIN_PATH = os.pathsep.join([os.environ.get('PATH', ''), '/usr/sbin', '/sbin',
                             '/usr/local/sbin'])
BINARIES = ('munged', 'slurmctld', 'slurmd', 'sbatch', 'srun', 'scontrol',
            'sinfo', 'squeue', 'scancel')
PACKAGES = 'slurm-wlm munge'
NODE = 'localhost'
# Jobs still on the node after scancel: KillWait (30s) then SIGKILL.
STOP_SECONDS = 60

CONF = """\
ClusterName=slimzoo
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket},cred_expire=10
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
SchedulerParameters=sched_interval=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
JobRequeue=1
KillWait=30
MessageTimeout=60
MinJobAge=600
InactiveLimit=0
NodeName={node} NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=4 RealMemory=1000 State=UNKNOWN
PartitionName=zoo Nodes={node} Default=YES DefaultTime=10 MaxTime=30 State=UP
"""


class SlurmUnavailable(Exception):
  """Slurm cannot run here; `skip` says whether a test may skip for it (no
  root, no apt-get) or must fail (root with apt-get: install it, as CI's
  .ci/run does)."""

  def __init__(self, reason, skip):
    super().__init__(reason)
    self.skip = skip


def binary(name):
  return shutil.which(name, path=SBIN_PATH)


def why_unavailable():
  """None when a private Slurm can start here, else SlurmUnavailable."""
  missing = [name for name in BINARIES if not binary(name)]
  if os.geteuid() != 0:
    return SlurmUnavailable(
        'a private Slurm needs root (slurmd starts jobs as their users); '
        'CI runs as root', skip=True)
  if missing:
    what = 'Slurm is not installed (no %s)' % ', '.join(missing)
    if not shutil.which('apt-get'):
      return SlurmUnavailable('%s and there is no apt-get to install %s' % (
          what, PACKAGES), skip=True)
    return SlurmUnavailable(
        '%s: apt-get install -y --no-install-recommends %s (.ci/run does, '
        'as root)' % (what, PACKAGES), skip=False)
  return None


def free_run_of_ports(count, host='127.0.0.1'):
  """A base port whose next `count` ports are free now."""
  for _ in range(50):
    probe = socket.socket()
    probe.bind((host, 0))
    base = probe.getsockname()[1]
    probe.close()
    if base + count > 65535:
      continue
    sockets = []
    try:
      for port in range(base, base + count):
        s = socket.socket()
        s.bind((host, port))
        sockets.append(s)
      return base
    except OSError:
      continue
    finally:
      for s in sockets:
        s.close()
  raise AssertionError('no %d free ports in a row' % count)


def _tail(path, chars=3000):
  try:
    with open(path, errors='replace') as f:
      return f.read()[-chars:]
  except OSError:
    return '(no %s)' % path


def _environ_of(pid):
  try:
    with open('/proc/%d/environ' % pid, 'rb') as f:
      items = f.read().split(b'\0')
  except OSError:
    return {}
  return dict(item.decode(errors='replace').split('=', 1)
              for item in items if b'=' in item)


def _cmdline_of(pid):
  try:
    with open('/proc/%d/cmdline' % pid, 'rb') as f:
      return [a.decode(errors='replace') for a in f.read().split(b'\0') if a]
  except OSError:
    return []


class SlurmCluster(object):

  def __init__(self, directory):
    self.dir = os.path.abspath(str(directory))
    self.conf = os.path.join(self.dir, 'slurm.conf')
    self.munge_socket = os.path.join(self.dir, 'munge.socket')
    self.env = dict(os.environ, SLURM_CONF=self.conf)
    for name in list(self.env):
      if name.startswith('SLURM_') and name != 'SLURM_CONF':
        del self.env[name]  # a test run inside a Slurm job
    self._daemons = []
    self.seconds_to_start = None

  # -- starting and stopping -------------------------------------------------
  def start(self, timeout=60):
    """Starts munged, slurmctld and slurmd; returns once the node is idle.
    Raises SlurmUnavailable, or AssertionError with the daemons' logs."""
    unavailable = why_unavailable()
    if unavailable:
      raise unavailable
    started = time.time()
    os.makedirs(self.dir, exist_ok=True)
    os.chmod(self.dir, 0o700)  # munged wants its key and socket private
    for name in ('state', 'spool'):
      os.makedirs(os.path.join(self.dir, name), exist_ok=True)
    self._start_munged(timeout)
    for attempt in range(3):  # a port found free may be taken meanwhile
      ctld_port, slurmd_port = free_run_of_ports(1), free_run_of_ports(1)
      with open(self.conf, 'w') as f:
        f.write(CONF.format(dir=self.dir, ctld_port=ctld_port,
                            slurmd_port=slurmd_port, node=NODE,
                            munge_socket=self.munge_socket))
      ctld = self._daemon('slurmctld', ['-D', '-f', self.conf])
      slurmd = self._daemon('slurmd', ['-D', '-f', self.conf, '-N', NODE])
      if self._wait_idle(started + timeout, ctld, slurmd):
        self.seconds_to_start = time.time() - started
        return self
      bound = 'Address already in use' in (
          _tail(os.path.join(self.dir, 'slurmctld.log')) +
          _tail(os.path.join(self.dir, 'slurmd.log')))
      for daemon in (slurmd, ctld):
        self._end(daemon)
      if not bound or attempt == 2:
        break
    raise AssertionError(
        'the private Slurm in %s did not come up within %ds\n%s' % (
            self.dir, timeout, self.logs()))

  def _start_munged(self, timeout):
    key = os.path.join(self.dir, 'munge.key')
    if not os.path.exists(key):
      fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
      with os.fdopen(fd, 'wb') as f:
        f.write(os.urandom(1024))
    munged = self._daemon('munged', [
        '--foreground', '--force', '--socket=%s' % self.munge_socket,
        '--key-file=%s' % key, '--pid-file=%s/munged.pid' % self.dir,
        '--log-file=%s/munged.log' % self.dir,
        '--seed-file=%s/munged.seed' % self.dir])
    deadline = time.time() + timeout
    while not os.path.exists(self.munge_socket):
      if munged.poll() is not None or time.time() > deadline:
        raise AssertionError('munged did not start (status %s)\n%s' % (
            munged.poll(), self.logs()))
      time.sleep(0.05)

  def _daemon(self, name, args):
    out = open(os.path.join(self.dir, '%s.out' % name), 'ab')
    process = subprocess.Popen([binary(name)] + args, env=self.env,
                               stdout=out, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, cwd=self.dir,
                               start_new_session=True)
    out.close()
    process.name = name
    self._daemons.append(process)
    return process

  def _wait_idle(self, deadline, *daemons):
    while time.time() < deadline:
      if any(d.poll() is not None for d in daemons):
        return False
      state = self.run('sinfo', '--noheader', '--format=%t', check=False,
                       timeout=10)
      if state.returncode == 0 and state.stdout.strip() == 'idle':
        return True
      time.sleep(0.1)
    return False

  def cancel(self, job_id, seconds=STOP_SECONDS):
    """scancel `job_id`, then wait (bounded) until its processes are gone and
    it holds no CPUs (a test's job left running would keep the next test's
    job pending)."""
    self.run('scancel', str(job_id), check=False, timeout=10)
    deadline = time.time() + seconds
    while time.time() < deadline:
      if not self.job_processes(job_id) and self.job(job_id).get(
          'JobState') not in ('RUNNING', 'COMPLETING', 'SUSPENDED'):
        return
      time.sleep(0.5)
    raise AssertionError('job %s still on the node %ds after scancel' % (
        job_id, seconds))

  def stop(self):
    """Cancels every job, waits (bounded) for them to leave the node, then
    ends the daemons and any process of this cluster left behind."""
    try:
      if any(d.poll() is None for d in self._daemons):
        jobs = self.run('squeue', '--noheader', '--format=%i', check=False,
                        timeout=10).stdout.split()
        if jobs:
          self.run('scancel', *jobs, check=False, timeout=10)
          deadline = time.time() + STOP_SECONDS
          while time.time() < deadline and (
              self._job_processes() or self._jobs_on_the_node()):
            time.sleep(0.5)
    finally:
      for process in self._job_processes():
        self._signal(process, signal.SIGKILL)
      for daemon in reversed(self._daemons):
        self._end(daemon)
      for process in self._job_processes(daemons_too=True):
        self._signal(process, signal.SIGKILL)

  def _jobs_on_the_node(self):
    return self.run('squeue', '--noheader', '--format=%i',
                    '--states=RUNNING,COMPLETING,SUSPENDED', check=False,
                    timeout=10).stdout.split()

  def _job_processes(self, daemons_too=False):
    """Pids of the processes of this cluster's jobs (they carry its
    SLURM_CONF and a SLURM_JOB_ID: the batch scripts, srun, the tasks); with
    `daemons_too`, of everything that carries its SLURM_CONF (the daemons'
    helpers too, e.g. slurmctld's slurmscriptd)."""
    found = []
    for entry in os.listdir('/proc'):
      if not entry.isdigit() or int(entry) == os.getpid():
        continue
      environ = _environ_of(int(entry))
      if environ.get('SLURM_CONF') == self.conf and (
          daemons_too or 'SLURM_JOB_ID' in environ):
        found.append(int(entry))
    return found

  @staticmethod
  def _signal(pid, signum):
    try:
      os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
      pass

  @staticmethod
  def _end(process):
    if process.poll() is None:
      process.terminate()
      try:
        process.wait(15)
      except subprocess.TimeoutExpired:
        process.kill()
        process.wait(15)

  def logs(self, chars=2000):
    return '\n'.join('--- %s ---\n%s' % (name, _tail(
        os.path.join(self.dir, name), chars)) for name in (
            'munged.log', 'slurmctld.log', 'slurmd.log', 'munged.out',
            'slurmctld.out', 'slurmd.out'))

  # -- using it --------------------------------------------------------------
  def run(self, *args, timeout=30, check=True, cwd=None):
    """A client command (sbatch, srun, scontrol, ...) of this cluster."""
    result = subprocess.run([binary(args[0])] + list(args[1:]), env=self.env,
                            capture_output=True, text=True, timeout=timeout,
                            cwd=cwd or self.dir)
    if check and result.returncode:
      raise AssertionError('%s exited %d:\n%s%s' % (
          ' '.join(args), result.returncode, result.stdout, result.stderr))
    return result

  def submit(self, script, output, cwd, *options):
    """sbatch `script` (a path) from `cwd` (SLURM_SUBMIT_DIR), its output
    appended to `output`; returns the job id."""
    result = self.run('sbatch', '--parsable', '--output=%s' % output,
                      *options, script, cwd=cwd)
    return result.stdout.strip().split(';')[0]

  def job(self, job_id):
    """scontrol show job -o as {field: value} (values without spaces)."""
    text = self.run('scontrol', 'show', 'job', '-o', str(job_id)).stdout
    return dict(re.findall(r'(?:^|\s)([A-Za-z:/]+)=(\S*)', text))

  def job_processes(self, job_id):
    """{pid: (environ, argv)} of the processes of `job_id`."""
    found = {}
    for pid in self._job_processes():
      environ = _environ_of(pid)
      if environ.get('SLURM_JOB_ID') == str(job_id):
        found[pid] = (environ, _cmdline_of(pid))
    return found
