"""A task's cluster from the variables Slurm's `srun` gives each task.

    SLURM_PROCID               this task's rank, 0 .. SLURM_NTASKS - 1
    SLURM_NTASKS               tasks in the job step
    SLURM_STEP_NODELIST        the step's nodes, compressed: node[01-04,07]
      (or SLURM_JOB_NODELIST)
    SLURM_STEP_TASKS_PER_NODE  tasks on each of those nodes, compressed: 2(x3),1
      (or SLURM_TASKS_PER_NODE)

Slurm's default (block) distribution puts ranks on the nodes in order: the
first node's count of ranks on the first node, and so on. A task listens on
`base_port` + its position among the tasks of its node. The first
`num_ps` ranks are the parameter servers, the rest the workers in rank order
(worker 0, the chief, is rank `num_ps`). The result is the cluster TF_CONFIG
would describe: {'worker': [...], 'ps': [...]} and this task's job and index.
"""
import re

DEFAULT_BASE_PORT = 8888

_RANGE = re.compile(r'^(\d+)(?:-(\d+))?$')


class SlurmError(ValueError):
  pass


def _split_top(text, separator=','):
  """`text` split at `separator`s outside brackets."""
  parts, depth, current = [], 0, ''
  for char in text:
    if char == '[':
      depth += 1
    elif char == ']':
      depth -= 1
      if depth < 0:
        raise SlurmError("hostlist '%s' has a ']' without its '['" % text)
    if char == separator and depth == 0:
      parts.append(current)
      current = ''
    else:
      current += char
  if depth:
    raise SlurmError("hostlist '%s' has a '[' without its ']'" % text)
  parts.append(current)
  return parts


def _expand_range_list(ranges, whole):
  """'01-04,07' -> ['01', '02', '03', '04', '07'] (the width of a bound with
  leading zeros is kept)."""
  values = []
  for item in ranges.split(','):
    match = _RANGE.match(item.strip())
    if not match:
      raise SlurmError("hostlist '%s': '%s' is not a number or a range "
                       'a-b' % (whole, item))
    low, high = match.group(1), match.group(2) or match.group(1)
    if int(high) < int(low):
      raise SlurmError("hostlist '%s': range '%s' goes down" % (whole, item))
    width = len(low) if low.startswith('0') else 0
    values.extend(str(n).zfill(width) for n in range(int(low), int(high) + 1))
  return values


def _expand_host(pattern, whole):
  """One host pattern, with any number of bracket groups (the product)."""
  match = re.search(r'\[([^\[\]]*)\]', pattern)
  if not match:
    if '[' in pattern or ']' in pattern:
      raise SlurmError("hostlist '%s' has unbalanced brackets" % whole)
    return [pattern]
  head, tail = pattern[:match.start()], pattern[match.end():]
  return [head + value + rest
          for value in _expand_range_list(match.group(1), whole)
          for rest in _expand_host(tail, whole)]


def expand_hostlist(text):
  """Slurm's compressed host list as a list of host names, in order:
  'node[01-04,07],gpu[1-2]-ib' -> node01 .. node04, node07, gpu1-ib,
  gpu2-ib; 'rack[1-2]-n[1-2]' -> rack1-n1, rack1-n2, rack2-n1, rack2-n2."""
  text = (text or '').strip()
  if not text:
    raise SlurmError('the hostlist is empty')
  hosts = []
  for pattern in _split_top(text):
    if not pattern.strip():
      raise SlurmError("hostlist '%s' has an empty entry" % text)
    hosts.extend(_expand_host(pattern.strip(), text))
  return hosts


def expand_tasks_per_node(text):
  """Slurm's tasks-per-node list: '2(x3),1' -> [2, 2, 2, 1]."""
  counts = []
  for item in (text or '').split(','):
    match = re.match(r'^\s*(\d+)(?:\(x(\d+)\))?\s*$', item)
    if not match:
      raise SlurmError("tasks per node '%s': '%s' is not N or N(xM)" % (
          text, item))
    counts.extend([int(match.group(1))] * int(match.group(2) or 1))
  return counts


def _variable(environ, *names):
  for name in names:
    if environ.get(name):
      return name, environ[name]
  raise SlurmError('%s is not set (is this task started by srun?)' %
                   ' or '.join(names))


def is_slurm_task(environ):
  """Whether `environ` is that of a task srun started in a job step of
  several tasks."""
  try:
    return int(environ.get('SLURM_NTASKS') or environ.get(
        'SLURM_STEP_NUM_TASKS') or 0) > 1 and 'SLURM_PROCID' in environ
  except ValueError:
    return False


def cluster_of(environ, num_ps=0, base_port=DEFAULT_BASE_PORT):
  """(jobs, task type, task index) of the task whose variables are
  `environ` (see the module docstring)."""
  names = {}
  values = {}
  for key, candidates in (('rank', ('SLURM_PROCID',)),
                          ('ntasks', ('SLURM_NTASKS', 'SLURM_STEP_NUM_TASKS')),
                          ('nodes', ('SLURM_STEP_NODELIST',
                                     'SLURM_JOB_NODELIST')),
                          ('per_node', ('SLURM_STEP_TASKS_PER_NODE',
                                        'SLURM_TASKS_PER_NODE'))):
    names[key], values[key] = _variable(environ, *candidates)
  for key in ('rank', 'ntasks'):
    if not values[key].strip().isdigit():
      raise SlurmError('%s=%r is not a number' % (names[key], values[key]))
  rank, ntasks = int(values['rank']), int(values['ntasks'])
  hosts = expand_hostlist(values['nodes'])
  per_node = expand_tasks_per_node(values['per_node'])
  if len(per_node) != len(hosts):
    raise SlurmError('%s=%s lists %d node(s) but %s=%s counts tasks for %d' % (
        names['nodes'], values['nodes'], len(hosts), names['per_node'],
        values['per_node'], len(per_node)))
  if sum(per_node) != ntasks:
    raise SlurmError('%s=%s places %d task(s) but %s=%d' % (
        names['per_node'], values['per_node'], sum(per_node),
        names['ntasks'], ntasks))
  if not 0 <= rank < ntasks:
    raise SlurmError('%s=%d is outside %s=%d' % (names['rank'], rank,
                                                names['ntasks'], ntasks))
  if not 0 <= num_ps < ntasks:
    raise SlurmError('--num_ps_tasks=%d leaves no worker among the %d Slurm '
                     'task(s)' % (num_ps, ntasks))
  if not (0 < base_port and base_port + max(per_node) - 1 < 65536):
    raise SlurmError('--slurm_base_port=%d: ports up to %d do not fit' % (
        base_port, base_port + max(per_node) - 1))
  addresses = ['%s:%d' % (host, base_port + local)
               for host, count in zip(hosts, per_node)
               for local in range(count)]
  jobs = {'worker': addresses[num_ps:]}
  if num_ps:
    jobs['ps'] = addresses[:num_ps]
  if rank < num_ps:
    return jobs, 'ps', rank
  return jobs, 'worker', rank - num_ps
