"""The project's error lines: one line that names the culprit and, for an
unknown name, the closest known one. Every package and script may import it
(it is part of the platform layer, with tf_compat and quiet_tensorflow)."""
import difflib
import re

import tensorflow as tf


def unknown_name_message(what, name, known):
  """`unknown model_name 'x'; did you mean 'y'? (known: ...)` in one line."""
  close = difflib.get_close_matches(str(name), list(known), n=1)
  hint = "; did you mean '%s'?" % close[0] if close else ''
  return "unknown %s '%s'%s (known: %s)" % (what, name, hint,
                                           ', '.join(sorted(known)))


def one_line(error):
  """One line for an error. A TensorFlow run-time error's message is a graph
  trace whose last unindented line is the cause."""
  text = getattr(error, 'message', None) or str(error) or repr(error)
  lines = [l.strip() for l in text.splitlines()
           if l.strip() and not l[0].isspace() and not l.startswith('Node:')]
  if isinstance(error, tf.errors.OpError):
    # Several devices failing at once: "N root error(s) found. (0) KIND: why"
    roots = re.findall(r'^\s*\(\d+\) [A-Z_]+: (.+)$', text, re.M)
    if roots:
      return roots[0]
    if lines:
      return lines[-1]
  return lines[0] if lines else repr(error)
