"""The Kubernetes manifests of docs/cluster.md (kept as deployment/k8s/*.yaml,
equal to the page's blocks): what each pod gets (TFJob's TF_CONFIG as the
training operator writes it; an indexed Job's completion index and its
peers' stable host names) starts the task the manifest means, every pod
mounts the one train_dir, and the exit codes the manifests act on are the
project's table (zoo_errors)."""
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

import zoo_errors
from deployment import cluster

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K8S = os.path.join(ROOT, 'deployment', 'k8s')
MANIFESTS = ('tfjob-ps.yaml', 'indexed-job-collective.yaml')
NAMESPACE = 'default'


def _load(name):
  with open(os.path.join(K8S, name)) as f:
    return {d['kind']: d for d in yaml.safe_load_all(f)}


def test_the_docs_show_the_manifest_files_as_they_are():
  page = open(os.path.join(ROOT, 'docs', 'cluster.md')).read()
  blocks = re.findall(r'```yaml\n(.*?)```', page, re.S)
  for name in MANIFESTS:
    assert open(os.path.join(K8S, name)).read() in blocks, name


@pytest.fixture(scope='module')
def train_flags():
  """The flags train_image_classifier.py reads."""
  result = subprocess.run([sys.executable, 'train_image_classifier.py',
                           '--helpfull'], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
  return set(re.findall(r'--(?:\[no\])?([\w.-]+)[: ]', result.stdout))


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


def test_the_manifests_act_on_the_projects_exit_statuses():
  rules = _load('indexed-job-collective.yaml')['Job']['spec'][
      'podFailurePolicy']['rules']
  codes = {r['action']: set(r['onExitCodes']['values'])
           for r in rules if 'onExitCodes' in r}
  assert all(r['onExitCodes']['operator'] == 'In'
             for r in rules if 'onExitCodes' in r)
  assert codes['FailJob'] == {zoo_errors.PERMANENT}
  # the retryable statuses: the project's own and a stop or kill's 128 + N
  assert codes['Count'] == {zoo_errors.RETRYABLE, 130, 137, 143}
  assert all(zoo_errors.is_retryable(c) for c in codes['Count'])
  assert not zoo_errors.is_retryable(zoo_errors.PERMANENT)
  # TFJob's ExitCode policy: 1-127 permanent, 128-255 retryable
  assert 1 <= zoo_errors.PERMANENT <= 127
  assert 128 <= zoo_errors.RETRYABLE <= 255
