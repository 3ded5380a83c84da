"""The packages import one another in one direction only, so each can be
read, tested and reused without the ones above it:

    platform <- deployment <- runner <- classification <- serving
             <- benchmarks <- scripts

with datasets, preprocessing and nets as leaves under classification (they
import only the platform and nets), and quantization (the graph rewrite for
quantization-aware training) a leaf on the platform alone. The platform is the top-level tf_compat,
quiet_tensorflow, zoo_errors and zoo_plugins; benchmarks holds the engines
the benchmark scripts run (benchmark_image_classifier.py's is
classifier_benchmark); every other top-level module is a script or, as
script_flags (the scripts' flag definitions), shared by the scripts only:
the top layer, which no package imports. No module imports itself back
through others, inside a package either: model_deploy (TF-Slim's clone API)
calls all_reduce (the replicated layouts), never the other way.
"""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLATFORM = ('tf_compat', 'quiet_tensorflow', 'zoo_errors', 'zoo_plugins')
LIBRARY = ('deployment', 'runner', 'classification', 'serving', 'benchmarks',
           'datasets', 'preprocessing', 'nets', 'quantization')

# Scripts at the paths TF-Slim gave them, inside a package: the top layer.
SCRIPTS_IN_PACKAGES = (os.path.join('nets', 'mobilenet_v1_train.py'),
                       os.path.join('nets', 'mobilenet_v1_eval.py'))

# What each layer may import besides itself.
MAY_IMPORT = {
    'platform': set(),
    'nets': {'platform'},
    'quantization': {'platform'},
    'datasets': {'platform', 'nets'},
    'preprocessing': {'platform', 'nets'},
    'deployment': {'platform'},
    'runner': {'platform', 'deployment'},
    'classification': {'platform', 'deployment', 'runner', 'datasets',
                       'preprocessing', 'nets', 'quantization'},
    'serving': {'platform', 'deployment', 'runner', 'classification',
                'datasets', 'preprocessing', 'nets', 'quantization'},
    'benchmarks': {'platform', 'deployment', 'runner', 'classification',
                   'serving', 'datasets', 'preprocessing', 'nets',
                   'quantization'},
    'scripts': {'platform', 'deployment', 'runner', 'classification',
                'serving', 'benchmarks', 'datasets', 'preprocessing', 'nets',
                'quantization'},
}


def _layer(module, scripts):
  """The layer of a top-level module or package name; None: not ours."""
  if module in PLATFORM:
    return 'platform'
  if module in LIBRARY:
    return module
  return 'scripts' if module in scripts else None


def _sources():
  """({path relative to ROOT: layer} of every module but the tests, the
  names of the top-level scripts)."""
  found = {}
  for folder, dirs, files in os.walk(ROOT):
    dirs[:] = [d for d in dirs if not d.startswith(('.', '__')) and
               d != 'tests']
    for name in files:
      if name.endswith('.py'):
        path = os.path.relpath(os.path.join(folder, name), ROOT)
        top = path.split(os.sep)[0]
        found[path] = ('scripts' if path in SCRIPTS_IN_PACKAGES else
                       top if top in LIBRARY else
                       'platform' if top[:-3] in PLATFORM else 'scripts')
  scripts = {p[:-3] for p, layer in found.items()
             if layer == 'scripts' and os.sep not in p}
  return found, scripts


def violations(path, layer, source, scripts):
  """'path:line imports X (a <layer> module imports only ...)' for each
  import of `source` against the order."""
  lines = []
  for node in ast.walk(ast.parse(source, path)):
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and not node.level:
      names = [node.module]
    else:
      continue
    for name in names:
      target = _layer(name.split('.')[0], scripts)
      if target and target != layer and target not in MAY_IMPORT[layer]:
        lines.append('%s:%d imports %s (a %s module imports only %s)' % (
            path, node.lineno, name, layer,
            ', '.join(sorted(MAY_IMPORT[layer])) or 'the standard library'))
  return lines


def test_every_import_follows_the_package_order():
  sources, scripts = _sources()
  assert {'classification', 'serving', 'runner', 'deployment', 'benchmarks',
          'platform'} <= set(sources.values())
  assert sources['script_flags.py'] == 'scripts'
  found = []
  for path, layer in sorted(sources.items()):
    with open(os.path.join(ROOT, path)) as f:
      found += violations(path, layer, f.read(), scripts)
  assert found == []


def test_an_import_against_the_order_is_reported():
  """The control: imports up the order, also inside functions, are found."""
  source = ('from deployment import cluster\n'
            'def f():\n'
            '  from runner import estimator\n'
            '  import train_image_classifier\n')
  assert violations('deployment/x.py', 'deployment', source,
                    {'train_image_classifier'}) == [
      'deployment/x.py:3 imports runner (a deployment module imports only '
      'platform)',
      'deployment/x.py:4 imports train_image_classifier (a deployment module '
      'imports only platform)']


def _module_path(name, known):
  """The file of module `name` ('deployment.model_deploy') among `known`
  paths, or None: not ours."""
  base = os.path.join(*name.split('.'))
  for path in (base + '.py', os.path.join(base, '__init__.py')):
    if path in known:
      return path
  return None


def imports_of(path, source, known):
  """The paths among `known` that `source` imports, also inside functions:
  `from a import b` counts as a/b.py where b is a module, else as a."""
  found = set()
  for node in ast.walk(ast.parse(source, path)):
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and not node.level:
      names = []
      for alias in node.names:
        submodule = node.module + '.' + alias.name
        names.append(submodule if _module_path(submodule, known)
                     else node.module)
    else:
      continue
    found.update(p for p in (_module_path(n, known) for n in names)
                 if p and p != path)
  return found


def cycles(graph):
  """Import cycles of `graph` ({path: paths it imports}), each the list of
  its paths from the smallest: [] when there is none, else at least one
  through every module that is on one."""
  found = set()

  def visit(path, trail):
    for target in sorted(graph.get(path, ())):
      if target in trail:
        cycle = trail[trail.index(target):]
        start = cycle.index(min(cycle))
        found.add(tuple(cycle[start:] + cycle[:start]))
      elif target not in done:
        visit(target, trail + [target])
    done.add(path)

  done = set()
  for path in sorted(graph):
    if path not in done:
      visit(path, [path])
  return sorted(list(c) for c in found)


def test_no_module_imports_itself_back_through_others():
  sources, _ = _sources()
  graph = {}
  for path in sources:
    with open(os.path.join(ROOT, path)) as f:
      graph[path] = imports_of(path, f.read(), sources)
  # The seams of the new rooms run one way.
  assert 'deployment/all_reduce.py' in graph['deployment/model_deploy.py']
  assert ('benchmarks/classifier_benchmark.py' in
          graph['benchmark_image_classifier.py'])
  assert cycles(graph) == []


def test_an_import_cycle_is_reported():
  """The control: a cycle through a submodule and a function's import."""
  known = {'deployment/model_deploy.py', 'deployment/all_reduce.py',
           'deployment/__init__.py', 'tf_compat.py'}
  graph = {
      'deployment/model_deploy.py': imports_of(
          'deployment/model_deploy.py',
          'import tf_compat\nfrom deployment.all_reduce import Copies\n', known),
      'deployment/all_reduce.py': imports_of(
          'deployment/all_reduce.py',
          'def f():\n  from deployment import model_deploy\n', known)}
  assert graph['deployment/model_deploy.py'] == {'tf_compat.py',
                                                 'deployment/all_reduce.py'}
  assert cycles(graph) == [['deployment/all_reduce.py',
                            'deployment/model_deploy.py']]
