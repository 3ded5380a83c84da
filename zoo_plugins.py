"""Finds a user's own network, dataset or preprocessing module by its import path.

A network, dataset or preprocessing that is not built in is one module that registers
itself when imported, as the built-in ones do; the scripts take its import
path where they take a name (`--model_name=tiny_net`, `--dataset_name=my_pets`,
`--preprocessing_name=my_preprocessing`). The scripts run with their own
directory on the path, so the current directory is added for the import: a
module beside where the user runs them is found, as is one on PYTHONPATH.
"""
import importlib
import os
import re
import sys

_IMPORT_PATH = re.compile(r'[A-Za-z_]\w*(\.[A-Za-z_]\w*)*')


def import_user_module(name, what):
  """The module `name`, imported; None when no module has that name. A
  module that exists but fails to import raises ValueError naming `what`
  (the flag) and the cause."""
  if not _IMPORT_PATH.fullmatch(str(name)):
    return None
  cwd = os.getcwd()
  added = cwd not in sys.path
  if added:
    sys.path.append(cwd)
  try:
    return importlib.import_module(name)
  except ModuleNotFoundError as e:
    if e.name and (name == e.name or name.startswith(e.name + '.')):
      return None  # the module itself (or its package) does not exist
    raise ValueError("%s module '%s' cannot be imported: %s" % (what, name, e)) from None
  finally:
    if added and cwd in sys.path:
      sys.path.remove(cwd)
