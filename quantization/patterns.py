"""Op-type patterns matched against a tf.Graph, backwards from a root op.

The quantization rewrite finds its layers with these, and what it finds
decides where the fake-quant ops go and what their variables are called, so
the matching keeps the exact semantics of TF 1.15's tf.contrib.quantize
matcher (the reference the checkpoints' names come from):

  * `Op('Conv2D|MatMul', inputs=[...])` matches an op of one of the types
    whose inputs match `inputs` one to one (no `inputs`: any inputs);
    `ordered=False` tries every permutation of `inputs`, in
    itertools.permutations order, and keeps the first that matches;
  * `Oneof([...])` is the first alternative that matches;
  * a match records, per pattern object, the op and tensor it matched. A
    pattern object used at several places records its last match, and the
    inputs matched by a permutation that failed further on stay recorded:
    both are how the reference behaves, and names depend on them.
"""
import itertools


class Op(object):
  """Matches an op whose type is one of `types` ('A|B', or '*' for any)."""

  def __init__(self, types='*', inputs=None, ordered=True):
    self.types = None if types == '*' else frozenset(types.split('|'))
    self.inputs = [p if isinstance(p, (Op, Oneof)) else Op(p)
                   for p in (inputs or [])]
    self.ordered = ordered

  def match(self, op, tensor):
    """{pattern: (op, tensor)} of a match rooted at `op`, or None."""
    if self.types is not None and op.type not in self.types:
      return None
    found = {self: (op, tensor)}
    if not self.inputs:
      return found
    if len(op.inputs) != len(self.inputs):
      return None
    orders = ([self.inputs] if self.ordered
              else itertools.permutations(self.inputs))
    for patterns in orders:
      for t, pattern in zip(op.inputs, patterns):
        sub = pattern.match(t.op, t)
        if sub is None:
          break
        found.update(sub)  # kept even if a later input fails this order
      else:
        return found
    return None


class Oneof(object):
  """Matches the first of `alternatives` that matches."""

  def __init__(self, alternatives):
    self.alternatives = list(alternatives)

  def match(self, op, tensor):
    for pattern in self.alternatives:
      found = pattern.match(op, tensor)
      if found is not None:
        return found
    return None


class Match(object):
  """What one match recorded: `op(pattern)` and `tensor(pattern)`, None for a
  pattern it did not reach."""

  def __init__(self, found):
    self._found = found

  def op(self, pattern):
    return self._found.get(pattern, (None, None))[0]

  def tensor(self, pattern):
    return self._found.get(pattern, (None, None))[1]


def matches(pattern, graph):
  """The Match of every op of `graph` (in creation order) that `pattern`
  matches as its root."""
  for op in graph.get_operations():
    found = pattern.match(op, None)
    if found is not None:
      yield Match(found)
