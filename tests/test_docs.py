"""README.md is a guide that stays true: short, with contents, its links and
those of docs/ resolve, and every command they show names a script that
exists with flags that script reads."""
import os
import re
import shlex
import subprocess
import sys

import pytest

import scripts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ['README.md'] + sorted(
    os.path.join('docs', name) for name in os.listdir(os.path.join(ROOT, 'docs'))
    if name.endswith('.md'))
README_MAX_LINES = 420


def _read(page):
  with open(os.path.join(ROOT, page)) as f:
    return f.read()


def _anchor(heading):
  """GitHub's anchor of a markdown heading."""
  text = heading.strip().lower()
  text = re.sub(r'[^\w\- ]', '', text)
  return text.replace(' ', '-')


def _prose(page):
  """The page without its fenced code blocks."""
  kept, fenced = [], False
  for line in _read(page).splitlines():
    if line.startswith('```'):
      fenced = not fenced
    elif not fenced:
      kept.append(line)
  return '\n'.join(kept)


def _anchors(page):
  text = _prose(page)
  return {_anchor(h) for h in re.findall(r'^#+ (.*)$', text, re.M)}


def test_readme_is_a_guide_of_at_most_about_400_lines_with_contents():
  text = _read('README.md')
  assert len(text.splitlines()) <= README_MAX_LINES
  contents = text[text.index('**Contents:**'):text.index('## The two commands')]
  linked = re.findall(r'\]\(#([^)]+)\)', contents)
  sections = [_anchor(h) for h in re.findall(r'^## (.*)$', text, re.M)]
  assert linked == sections


@pytest.mark.parametrize('page', PAGES)
def test_links_resolve_to_files_and_headings(page):
  text = _prose(page)
  for target in re.findall(r'\]\(([^)\s]+)\)', text):
    if re.match(r'[a-z]+://', target):
      continue
    path, _, anchor = target.partition('#')
    resolved = (os.path.normpath(os.path.join(os.path.dirname(page), path))
                if path else page)
    assert os.path.exists(os.path.join(ROOT, resolved)), (page, target)
    if anchor and resolved.endswith('.md'):
      assert anchor in _anchors(resolved), (page, target)


def _commands():
  """(page, script, [flag names]) of every `python <file>.py ...` line in the
  sh/bash blocks of the pages; a command after `--` (`-m deployment.launch
  ... -- script`, `benchmarks/task_resources.py -- python ...`) counts for
  its own script."""
  found = []
  for page in PAGES:
    for block in re.findall(r'```(?:sh|bash)\n(.*?)```', _read(page), re.S):
      for line in block.replace('\\\n', ' ').splitlines():
        line = line.split('#', 1)[0].strip()
        if line.startswith('python '):
          found += [(page, script, flags) for script, flags in
                    _command(shlex.split(line)[1:])]
  return found


def _command(words):
  """[(script, flag names)] of `python WORDS`, and of the command after its
  `--`; [] for a module of TensorFlow's (freeze_graph)."""
  if words[0] == '-m':
    if words[1] != 'deployment.launch':
      return []
    script, words = 'deployment/launch.py', words[2:]
  else:
    script, words = words[0], words[1:]
  if '--' not in words:
    return [(script, _flags(words))]
  split = words.index('--')
  rest = words[split + 1:]
  inner = _command(rest[1:] if rest[0] == 'python' else rest)
  return [(script, _flags(words[:split]))] + inner


def _flags(words):
  return sorted({w[2:].split('=')[0] for w in words if w.startswith('--')})


def test_the_pages_show_commands():
  scripts = {script for _, script, _ in _commands()}
  assert {'train_image_classifier.py', 'eval_image_classifier.py',
          'export_model.py', 'benchmark_image_classifier.py',
          'deployment/launch.py'} <= scripts


@pytest.mark.slow
def test_every_command_names_a_script_and_flags_it_reads():
  known = {}
  for page, script, flags in _commands():
    assert os.path.isfile(os.path.join(ROOT, script)), (page, script)
    if script not in known:
      # absl scripts list every flag with --helpfull, argparse ones with --help.
      for option in ('--helpfull', '--help'):
        if script == 'deployment/launch.py':  # python -m deployment.launch
          result = subprocess.run(
              [sys.executable, '-m', 'deployment.launch', option], cwd=ROOT,
              capture_output=True, text=True, timeout=120, check=False)
        else:
          result = scripts.run(script, option, timeout=120)
        if result.returncode in (0, 1):
          break
      assert result.returncode in (0, 1), (script, result.stderr[-2000:])
      known[script] = set(re.findall(r'--(?:\[no\])?([\w.-]+)[: ]',
                                     result.stdout + result.stderr))
    unknown = [f for f in flags if f not in known[script]]
    assert not unknown, '%s: %s has no flag %s' % (page, script, unknown)
