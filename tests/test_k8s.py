"""The Kubernetes manifests of docs/cluster.md (kept as deployment/k8s/*.yaml,
equal to the page's blocks): valid against Kubernetes' own strict schemas
and the TFJob CRD's; what each pod gets (TFJob's TF_CONFIG as the training
operator writes it; an indexed Job's completion index and its peers' stable
host names) starts the task the manifest means, every pod mounts the one
train_dir, and the exit codes the manifests act on are the project's table
(zoo_errors): every permanent status fails the job, the retryable ones
restart it, and a crash loop ends through the chief's
--max_starts_without_progress."""
import copy
import json
import os
import re
import signal

import jsonschema
import kubernetes_validate
import pytest
import yaml

import zoo_errors
from deployment import cluster
import scripts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K8S = os.path.join(ROOT, 'deployment', 'k8s')
MANIFESTS = ('tfjob-ps.yaml', 'indexed-job-collective.yaml')
NAMESPACE = 'default'
# Kubernetes' strict schemas (kubernetes-validate's) the manifests pass:
# from 1.29, the first whose Job schema takes a podFailurePolicy rule on
# exit codes alone (1.25-1.28's require onPodConditions in every rule), to
# the newest the pinned kubernetes-validate ships.
KUBERNETES_VERSIONS = ['1.%d' % minor for minor in range(29, 38)]
# The TFJob CRD's v1 openAPIV3Schema (its source is named inside).
TFJOB_CRD_SCHEMA = os.path.join(ROOT, 'tests', 'data', 'tfjob_crd_schema.json')
# Every status the table calls permanent: 1-127, TFJob's ExitCode split.
PERMANENT_STATUSES = [s for s in range(1, 256) if not zoo_errors.is_retryable(s)]


def _documents(name):
  with open(os.path.join(K8S, name)) as f:
    return [d for d in yaml.safe_load_all(f) if d]


def _load(name):
  return {d['kind']: d for d in _documents(name)}


def test_the_docs_show_the_manifest_files_as_they_are():
  page = open(os.path.join(ROOT, 'docs', 'cluster.md')).read()
  blocks = re.findall(r'```yaml\n(.*?)```', page, re.S)
  for name in MANIFESTS:
    assert open(os.path.join(K8S, name)).read() in blocks, name


@pytest.fixture(scope='module')
def train_help():
  """train_image_classifier.py --helpfull: every flag with its default."""
  result = scripts.run('train_image_classifier.py', '--helpfull', timeout=120)
  return result.stdout


@pytest.fixture(scope='module')
def train_flags(train_help):
  """The flags train_image_classifier.py reads."""
  return set(re.findall(r'--(?:\[no\])?([\w.-]+)[: ]', train_help))


def _container(pod_spec, name):
  [container] = [c for c in pod_spec['containers'] if c['name'] == name]
  return container


def _flags(args):
  return dict(a[2:].split('=', 1) for a in args)


def _train_dir_on_shared_volume(pod_spec, container, claims):
  flags = _flags(container['args'])
  mounts = {m['name']: m['mountPath'] for m in container['volumeMounts']}
  volumes = {v['name']: v['persistentVolumeClaim']['claimName']
             for v in pod_spec['volumes']}
  shared = [path for name, path in mounts.items()
            if volumes.get(name) in claims]
  assert any(flags['train_dir'].startswith(path + '/') for path in shared)


def _operator_tf_config(job, replica_type, index):
  """TF_CONFIG as Kubeflow's training operator writes it for a pod: every
  replica type's pods as <name>-<type>-<i>.<namespace>.svc:<the tensorflow
  container's tfjob-port>, and the pod's own type and index."""
  jobs = {}
  for kind, spec in job['spec']['tfReplicaSpecs'].items():
    ports = _container(spec['template']['spec'], 'tensorflow')['ports']
    [port] = [p['containerPort'] for p in ports if p['name'] == 'tfjob-port']
    jobs[kind.lower()] = ['%s-%s-%d.%s.svc:%d' % (
        job['metadata']['name'], kind.lower(), i, NAMESPACE, port)
                          for i in range(spec['replicas'])]
  return json.dumps({'cluster': jobs, 'environment': 'cloud',
                     'task': {'type': replica_type.lower(), 'index': index}})


def test_each_tfjob_pod_starts_its_task_of_one_ps_and_two_workers(
    train_flags):
  manifest = _load('tfjob-ps.yaml')
  job = manifest['TFJob']
  claims = {manifest['PersistentVolumeClaim']['metadata']['name']}
  assert 'ReadWriteMany' in manifest['PersistentVolumeClaim']['spec'][
      'accessModes']
  seen = []
  for kind, spec in job['spec']['tfReplicaSpecs'].items():
    # 128-255 restarts the pod, 1-127 fails the job: the project's split
    assert spec['restartPolicy'] == 'ExitCode'
    pod = spec['template']['spec']
    container = _container(pod, 'tensorflow')
    assert container['command'] == ['python', 'train_image_classifier.py']
    assert set(_flags(container['args'])) <= train_flags
    _train_dir_on_shared_volume(pod, container, claims)
    for index in range(spec['replicas']):
      task = cluster.Cluster.from_flags(environ={
          'TF_CONFIG': _operator_tf_config(job, kind, index)})
      name = '%s-%s-%d' % (job['metadata']['name'], kind.lower(), index)
      assert task.master == 'grpc://%s.%s.svc:2222' % (name, NAMESPACE)
      seen.append((task.task_type, task.task_id, task.is_chief,
                   task.num_ps, task.num_workers, task.collective))
  assert sorted(seen) == [('ps', 0, False, 1, 2, False),
                          ('worker', 0, True, 1, 2, False),
                          ('worker', 1, False, 1, 2, False)]


def _substitute(text, env):
  """Kubernetes' $(VAR) expansion in a container's args."""
  return re.sub(r'\$\((\w+)\)', lambda m: env[m.group(1)], text)


def test_each_indexed_job_pod_starts_its_collective_worker(train_flags):
  manifest = _load('indexed-job-collective.yaml')
  job, service = manifest['Job'], manifest['Service']
  spec = job['spec']
  pod = spec['template']['spec']
  assert spec['completionMode'] == 'Indexed'
  assert spec['completions'] == spec['parallelism'] == 2
  # the peers' stable names: <job>-<index>.<subdomain>, a headless Service
  # selecting the Job's pods
  assert pod['subdomain'] == service['metadata']['name']
  assert service['spec']['clusterIP'] == 'None'
  assert service['spec']['selector'] == {'job-name': job['metadata']['name']}
  container = _container(pod, 'train')
  [index_env] = [e for e in container['env'] if e['name'] == 'TASK_INDEX']
  assert index_env['valueFrom']['fieldRef']['fieldPath'] == (
      "metadata.annotations['batch.kubernetes.io/job-completion-index']")
  assert set(_flags(container['args'])) <= train_flags
  claims = {v['persistentVolumeClaim']['claimName'] for v in pod['volumes']}
  _train_dir_on_shared_volume(pod, container, claims)
  seen = []
  for index in range(spec['completions']):
    flags = _flags(_substitute(a, {'TASK_INDEX': str(index)})
                   for a in container['args'])
    task = cluster.Cluster.from_flags(
        flags.get('ps_hosts', ''), flags['worker_hosts'], flags['job_name'],
        int(flags['task']), environ={})
    hostname = '%s-%d.%s' % (job['metadata']['name'], index, pod['subdomain'])
    assert task.master == 'grpc://%s:%d' % (
        hostname, container['ports'][0]['containerPort'])
    assert flags['variable_update'] == 'collective_all_reduce'
    seen.append((task.task_type, task.task_id, task.is_chief,
                 task.collective))
  assert seen == [('worker', 0, True, True), ('worker', 1, False, True)]


# -- schemas ----------------------------------------------------------------------
def _strict(schema):
  """A CRD schema as the API server applies it under strict field validation
  (kubectl's default): an unknown field of an object with listed properties
  is an error, not pruned."""
  if isinstance(schema, list):
    return [_strict(s) for s in schema]
  if not isinstance(schema, dict):
    return schema
  schema = {key: _strict(value) for key, value in schema.items()}
  if ('properties' in schema and 'additionalProperties' not in schema and
      not schema.get('x-kubernetes-preserve-unknown-fields')):
    schema['additionalProperties'] = False
  return schema


@pytest.fixture(scope='module')
def tfjob_validator():
  with open(TFJOB_CRD_SCHEMA) as f:
    schema = _strict(json.load(f)['openAPIV3Schema'])
  # OpenAPI 3.0's schema objects are JSON Schema draft 4's keywords.
  jsonschema.Draft4Validator.check_schema(schema)
  return jsonschema.Draft4Validator(schema)


@pytest.mark.parametrize('version', KUBERNETES_VERSIONS)
@pytest.mark.parametrize('name', MANIFESTS)
def test_the_manifests_pass_kubernetes_strict_schemas(name, version):
  """Every document but the TFJob (a custom resource) against Kubernetes'
  own schemas, strict: a missing required field, a wrong type and an unknown
  or misspelled field are errors."""
  for document in _documents(name):
    if document['kind'] != 'TFJob':
      assert kubernetes_validate.validate(
          document, version, strict=True) == version, document['kind']


def test_the_tfjob_passes_the_tfjob_crd_schema(tfjob_validator):
  job = _load('tfjob-ps.yaml')['TFJob']
  assert (job['apiVersion'], job['kind']) == ('kubeflow.org/v1', 'TFJob')
  tfjob_validator.validate(job)


def test_a_misspelled_field_fails_both_schemas(tfjob_validator):
  job = copy.deepcopy(_load('indexed-job-collective.yaml')['Job'])
  job['spec']['backofLimit'] = job['spec'].pop('backoffLimit')
  with pytest.raises(kubernetes_validate.ValidationError, match='backofLimit'):
    kubernetes_validate.validate(job, KUBERNETES_VERSIONS[-1], strict=True)
  tfjob = copy.deepcopy(_load('tfjob-ps.yaml')['TFJob'])
  worker = tfjob['spec']['tfReplicaSpecs']['Worker']
  worker['restartpolicy'] = worker.pop('restartPolicy')
  with pytest.raises(jsonschema.ValidationError, match='restartpolicy'):
    tfjob_validator.validate(tfjob)
  tfjob = copy.deepcopy(_load('tfjob-ps.yaml')['TFJob'])
  [container] = tfjob['spec']['tfReplicaSpecs']['PS']['template']['spec'][
      'containers']
  container['workdir'] = container.pop('workingDir')
  with pytest.raises(jsonschema.ValidationError, match='workdir'):
    tfjob_validator.validate(tfjob)


@pytest.mark.parametrize('version', ['1.29', '1.34'])
def test_a_pod_condition_rule_without_status_fails_the_schemas(version):
  """The rule the indexed Job had: Kubernetes 1.29-1.34 require `status`."""
  job = copy.deepcopy(_load('indexed-job-collective.yaml')['Job'])
  for rule in job['spec']['podFailurePolicy']['rules']:
    for condition in rule.get('onPodConditions', []):
      condition.pop('status', None)
  with pytest.raises(kubernetes_validate.ValidationError,
                     match="'status' is a required property"):
    kubernetes_validate.validate(job, version, strict=True)


# -- exit statuses ----------------------------------------------------------------
def _rules():
  return _load('indexed-job-collective.yaml')['Job']['spec'][
      'podFailurePolicy']['rules']


def _on_exit_codes(action):
  [rule] = [r for r in _rules() if r['action'] == action and 'onExitCodes' in r]
  return rule['onExitCodes']


def _job_action(exit_code, conditions=()):
  """What the Job controller does with a pod that failed with `exit_code` and
  has the pod conditions `conditions` (True): the first rule that matches
  acts; none matching counts the failure toward backoffLimit."""
  for rule in _rules():
    if 'onExitCodes' in rule:
      codes = rule['onExitCodes']
      if (exit_code in codes['values']) == (codes['operator'] == 'In'):
        return rule['action']
    elif any(c['type'] in conditions and c.get('status', 'True') == 'True'
             for c in rule['onPodConditions']):
      return rule['action']
  return 'Count'


def test_the_indexed_job_fails_on_every_permanent_status():
  codes = _on_exit_codes('FailJob')
  assert codes['operator'] == 'In'
  assert codes['values'] == PERMANENT_STATUSES == list(range(1, 128))
  assert zoo_errors.PERMANENT in codes['values']


def test_the_indexed_job_counts_the_retryable_statuses():
  codes = _on_exit_codes('Count')
  assert codes['operator'] == 'In'
  assert all(zoo_errors.is_retryable(c) for c in codes['values'])
  # the project's own and a stop or kill's 128 + N
  assert set(codes['values']) == {
      zoo_errors.RETRYABLE, zoo_errors.signal_status(signal.SIGINT),
      zoo_errors.signal_status(signal.SIGKILL),
      zoo_errors.signal_status(signal.SIGTERM)}


def test_the_exit_code_rules_keep_the_job_apis_limits():
  """What the API server checks beyond the schema: each rule names the
  container, its values are ascending without repeats, at most 255, and 0
  is not one of `In`'s."""
  [container] = _load('indexed-job-collective.yaml')['Job']['spec'][
      'template']['spec']['containers']
  for action in ('FailJob', 'Count'):
    codes = _on_exit_codes(action)
    assert codes['containerName'] == container['name']
    assert codes['values'] == sorted(set(codes['values']))
    assert 1 <= len(codes['values']) <= 255
    assert 0 not in codes['values']


def test_the_indexed_job_acts_on_each_kind_of_ending():
  assert _job_action(zoo_errors.PERMANENT) == 'FailJob'  # a crash loop too
  assert _job_action(2) == 'FailJob'  # argparse's usage error
  assert _job_action(zoo_errors.RETRYABLE) == 'Count'  # a peer lost
  assert _job_action(137) == 'Count'  # killed for memory
  assert _job_action(139) == 'Count'  # a signal no rule names
  # preempted, evicted, drained: replaced without counting
  assert _job_action(143, {'DisruptionTarget'}) == 'Ignore'
  assert _job_action(137, {'DisruptionTarget'}) == 'Ignore'


def test_the_tfjob_restarts_on_retryable_and_fails_on_permanent():
  # TFJob's ExitCode policy: 1-127 permanent, 128-255 retryable
  for spec in _load('tfjob-ps.yaml')['TFJob']['spec'][
      'tfReplicaSpecs'].values():
    assert spec['restartPolicy'] == 'ExitCode'
  assert PERMANENT_STATUSES == list(range(1, 128))
  assert all(zoo_errors.is_retryable(s) for s in range(128, 256))
  assert 128 <= zoo_errors.RETRYABLE <= 255


def test_both_manifests_end_a_crash_loop_with_the_chiefs_default(train_help):
  """Neither job bounds a crash loop by itself for certain (TFJob's
  backoffLimit does not count ExitCode restarts: kubeflow/trainer issue
  2045), so every training container spells out the chief's bound on starts
  without progress, at the script's default."""
  default = re.search(r'--max_starts_without_progress: .*?'
                      r"\(default: '(\d+)'\)", train_help, re.S)
  assert default, 'train_image_classifier.py has no --max_starts_without_progress'
  containers = [_container(spec['template']['spec'], 'tensorflow')
                for spec in _load('tfjob-ps.yaml')['TFJob']['spec'][
                    'tfReplicaSpecs'].values()]
  containers.append(_container(_load('indexed-job-collective.yaml')['Job'][
      'spec']['template']['spec'], 'train'))
  for container in containers:
    assert _flags(container['args'])['max_starts_without_progress'] == (
        default.group(1))
