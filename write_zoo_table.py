"""Writes the zoo table of docs/zoo.md from the network registry, and nothing else.

    python write_zoo_table.py           # rewrites the table in docs/zoo.md
    python write_zoo_table.py --check   # exits 1 if docs/zoo.md's table is stale

The table sits between the BEGIN and END markers below in docs/zoo.md; every
cell comes from a registration (nets/registry.py), so the page cannot
disagree with the code: tests/test_registry.py fails when it is stale.
The page is rewritten under a temporary name and renamed into place.
"""
import os
import sys

from absl import app
from absl import flags

import quiet_tensorflow  # noqa: F401  (first: TensorFlow's noise off the terminal)
import tf_compat  # noqa: F401

from nets import nets_factory

F = flags.FLAGS
ZOO_PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'docs', 'zoo.md')
BEGIN = '<!-- zoo_table:begin (python write_zoo_table.py writes it) -->'
END = '<!-- zoo_table:end -->'

flags.DEFINE_string('page', ZOO_PAGE, 'The page whose zoo table to write.')
flags.DEFINE_bool('check', False, 'Only check: exit 1 if the table is stale.')


def _percent(value):
  return '' if value is None else '%.1f' % value


def _row(info):
  size = str(info.default_image_size)
  if info.num_frames:
    size += ' x %d frames' % info.num_frames
  published = info.published
  return [
      '`%s`' % info.name, size, str(info.num_classes), str(info.labels_offset),
      info.preprocessing_name,
      ', '.join('`%s`' % s for s in info.logits_scopes),
      '`%s`' % published.file_name if published else 'none',
      _percent(published and published.top1),
      _percent(published and published.top5)]


def table(names=None):
  """The zoo table in Markdown, one row per registered network."""
  header = ['model_name', 'image size', 'classes', '--labels_offset',
            'preprocessing', 'classifier scopes', "TF-Slim's checkpoint",
            'top-1', 'top-5']
  rows = [header, ['---'] * len(header)]
  rows += [_row(nets_factory.get_info(n))
           for n in (names or nets_factory.list_models())]
  return '\n'.join('| %s |' % ' | '.join(row) for row in rows) + '\n'


def replace_table(text, new_table, path='docs/zoo.md'):
  """`text` with the section between BEGIN and END replaced by `new_table`."""
  start, end = text.find(BEGIN), text.find(END)
  if start < 0 or end < start:
    raise ValueError("%s has no zoo table section: put '%s' and '%s' on lines "
                     'of their own where it goes' % (path, BEGIN, END))
  return text[:start + len(BEGIN)] + '\n' + new_table + text[end:]


def main(_):
  try:
    with open(F.page) as f:
      text = f.read()
    updated = replace_table(text, table(), F.page)
  except OSError as e:
    print('write_zoo_table: error: cannot read --page %s: %s' % (
        F.page, e.strerror), file=sys.stderr)
    return 1
  except ValueError as e:
    print('write_zoo_table: error: %s' % e, file=sys.stderr)
    return 1
  if F.check:
    if updated != text:
      print('write_zoo_table: %s: the zoo table is stale; run python '
            'write_zoo_table.py' % F.page, file=sys.stderr)
      return 1
    print('%s: the zoo table is current' % F.page)
    return 0
  if updated != text:
    temporary = F.page + '.zoo_table.tmp'
    with open(temporary, 'w') as f:
      f.write(updated)
    os.replace(temporary, F.page)
  print('%s: zoo table of %d networks written' % (
      F.page, len(nets_factory.list_models())))
  return 0


if __name__ == '__main__':
  app.run(lambda argv: sys.exit(main(argv)))
