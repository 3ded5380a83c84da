"""An int8 TFLite model for microcontrollers: the C array TensorFlow Lite
Micro (TFLM) compiles, and the tensor arena its interpreter needs.

`c_sources` writes the flatbuffer as TFLM's examples compile theirs (the
person_detection example's person_detect_model_data.cc/.h):

    model_data.h   extern const unsigned char g_model_data[];
                   extern const int g_model_data_len;
    model_data.cc  alignas(16) const unsigned char g_model_data[] = {...};
                   const int g_model_data_len = <bytes>;

TFLM reads the flatbuffer in place (from flash), hence the alignment.

`measure_arena` asks TFLM's own interpreter (the `tflite-micro` package, a
dev requirement) what the model needs: it prepares the model in a generous
arena with TFLM's recording allocator, takes the arena bytes that allocator
reports, and runs one inference in an arena of exactly that size to show it
suffices. `run_micro` runs images through TFLM's interpreter. Both run TFLM
in a child process (this file as a script): TFLM's Python interpreter
aborts the whole process, rather than raising, on some models it cannot
prepare and on some arenas too small.

The arena is measured on this (64-bit) host with TFLM's reference kernels
and its recording allocator: a 32-bit microcontroller with the plain
allocator needs a little less (smaller pointers and tensor structs, no
records), optimized kernels (CMSIS-NN's, ...) may ask for scratch buffers
of their own.
"""
import importlib.metadata
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

CC_FILENAME = 'model_data.cc'
HEADER_FILENAME = 'model_data.h'
ARRAY_NAME = 'g_model_data'
ALIGNMENT = 16  # TFLM's kernels read tensors in place; its examples use 16
BYTES_PER_LINE = 12
PACKAGE = 'tflite-micro'  # on PyPI; imported as tflite_micro
# The arena the measurement prepares the model in: far more than any model
# for a microcontroller needs (the interpreter touches only what it uses).
PROBE_ARENA = 64 << 20
_HEX = ['0x%02x, ' % b for b in range(256)]
_REPORT = re.compile(r'Arena allocation total (\d+) bytes')


class MicroError(ValueError):
  """TFLM's interpreter is missing, or cannot prepare or run the model."""


# -- the C array ---------------------------------------------------------------
def c_sources(model_bytes, comment=''):
  """{filename: text} of model_data.cc and model_data.h holding
  `model_bytes`; `comment` (paragraphs, one a line) heads both files."""
  model_bytes = bytes(model_bytes)
  head = ''.join('// %s\n' % line if line else '//\n'
                 for paragraph in comment.splitlines()
                 for line in textwrap.wrap(paragraph, 77) or [''])
  guard = HEADER_FILENAME.upper().replace('.', '_') + '_'
  header = (
      '%s#ifndef %s\n#define %s\n\n'
      'extern const unsigned char %s[];\n'
      'extern const int %s_len;\n\n'
      '#endif  // %s\n' % (head, guard, guard, ARRAY_NAME, ARRAY_NAME, guard))
  rows = ('  ' + ''.join(map(_HEX.__getitem__,
                            model_bytes[i:i + BYTES_PER_LINE])).rstrip()
          for i in range(0, len(model_bytes), BYTES_PER_LINE))
  # The header's extern declarations give the const definitions below
  # external linkage (C++ const objects are internal otherwise).
  source = (
      '%s#include "%s"\n\n'
      'alignas(%d) const unsigned char %s[] = {\n%s\n};\n'
      'const int %s_len = %d;\n' % (
          head, HEADER_FILENAME, ALIGNMENT, ARRAY_NAME, '\n'.join(rows),
          ARRAY_NAME, len(model_bytes)))
  return {CC_FILENAME: source, HEADER_FILENAME: header}


def write_c_sources(directory, model_bytes, comment=''):
  """Writes model_data.cc and model_data.h into `directory`; returns their
  paths."""
  paths = []
  for name, text in c_sources(model_bytes, comment).items():
    paths.append(os.path.join(directory, name))
    with open(paths[-1], 'w') as f:
      f.write(text)
  return paths


def _schema_and_model(model_bytes):
  # TensorFlow's reader of the flatbuffer schema (TFLM's needs tflite-micro).
  from tensorflow.lite.python import schema_py_generated as schema
  return schema, schema.Model.GetRootAsModel(bytes(model_bytes), 0)


# The metadata TFLM's interpreter reads (its allocator's offline plan); the
# converter's others (min_runtime_version, CONVERSION_METADATA) it never does.
MICRO_METADATA = ('OfflineMemoryAllocation',)


def slim_for_micro(model_bytes, keep_outputs=None):
  """The flatbuffer without what TFLM's interpreter never reads: the names
  of the tensors other than the inputs and outputs, the subgraph's name,
  the description, signature defs, metadata other than MICRO_METADATA (and
  their buffers), the data of buffers no tensor uses; with `keep_outputs`
  (names), the other outputs and the ops, tensors, buffers and operator
  codes only they need. Weights, quantization and ops are untouched: TFLM
  and TFLite compute what they computed. Returns the bytes."""
  import flatbuffers
  schema, _ = _schema_and_model(model_bytes)
  model = schema.ModelT.InitFromObj(
      schema.Model.GetRootAsModel(bytes(model_bytes), 0))
  if len(model.subgraphs) != 1:
    return bytes(model_bytes)  # control flow: left as the converter wrote it
  graph = model.subgraphs[0]
  if keep_outputs is not None:
    kept = [i for i in graph.outputs
            if graph.tensors[i].name.decode() in keep_outputs]
    if kept:
      graph.outputs = kept
      _drop_unused(model, graph)
  io = set(graph.inputs) | set(graph.outputs)
  for i, tensor in enumerate(graph.tensors):
    if i not in io:
      tensor.name = None
  graph.name = None
  model.description = None
  model.signatureDefs = None
  metadata = [m for m in model.metadata or []
              if m.name.decode() in MICRO_METADATA]
  used = {t.buffer for t in graph.tensors} | {m.buffer for m in metadata}
  for i, buffer in enumerate(model.buffers):
    if i not in used:
      buffer.data = None
  model.metadata = metadata or None
  builder = flatbuffers.Builder(len(model_bytes) + 1024)
  builder.Finish(model.Pack(builder), file_identifier=b'TFL3')
  return bytes(builder.Output())


def _drop_unused(model, graph):
  """Removes the ops no output needs, then the tensors and operator codes
  nothing uses (indices renumbered)."""
  needed, wanted = [], set(graph.outputs)
  for op in reversed(graph.operators):
    if wanted & set(op.outputs):
      needed.append(op)
      wanted |= {i for i in op.inputs if i >= 0}
  graph.operators = needed[::-1]
  used = sorted(set(graph.inputs) | set(graph.outputs) | {
      i for op in graph.operators
      for i in list(op.inputs) + list(op.outputs) + list(op.intermediates or [])
      if i >= 0})
  renumber = {old: new for new, old in enumerate(used)}
  renumber[-1] = -1  # an optional input left out
  graph.tensors = [graph.tensors[i] for i in used]
  graph.inputs = [renumber[i] for i in graph.inputs]
  graph.outputs = [renumber[i] for i in graph.outputs]
  codes = sorted({op.opcodeIndex for op in graph.operators})
  recode = {old: new for new, old in enumerate(codes)}
  model.operatorCodes = [model.operatorCodes[i] for i in codes]
  for op in graph.operators:
    op.inputs = [renumber[i] for i in op.inputs]
    op.outputs = [renumber[i] for i in op.outputs]
    if op.intermediates is not None:
      op.intermediates = [renumber[i] for i in op.intermediates]
    op.opcodeIndex = recode[op.opcodeIndex]


def resolver_ops(model_bytes):
  """The MicroMutableOpResolver calls the model needs, e.g. 'AddConv2D'
  (builtin ops; a custom op by its custom code)."""
  schema, model = _schema_and_model(model_bytes)
  names = {v: k for k, v in vars(schema.BuiltinOperator).items()
           if not k.startswith('_')}
  ops = set()
  for i in range(model.OperatorCodesLength()):
    code = model.OperatorCodes(i)
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    if builtin == schema.BuiltinOperator.CUSTOM:
      ops.add(code.CustomCode().decode())
    else:  # DEPTHWISE_CONV_2D -> AddDepthwiseConv2D
      ops.add('Add' + ''.join(
          part if part[0].isdigit() else part.capitalize()
          for part in names[builtin].split('_')))
  return sorted(ops)


def input_quantization(model_bytes):
  """(scale, zero point) of the model's input: the device feeds
  round(x / scale) + zero point for the preprocessed value x."""
  _, model = _schema_and_model(model_bytes)
  graph = model.Subgraphs(0)
  quantization = graph.Tensors(graph.Inputs(0)).Quantization()
  return float(quantization.Scale(0)), int(quantization.ZeroPoint(0))


def facts(model_bytes):
  """What export.json records of a model for microcontrollers: its bytes,
  the C files and array, the resolver's ops, the input's quantization and
  the tensor arena TFLM measured (None, with `arena_not_measured` saying
  why, when it could not be measured)."""
  scale, zero_point = input_quantization(model_bytes)
  recorded = {'model_bytes': len(model_bytes),
              'files': [CC_FILENAME, HEADER_FILENAME], 'array': ARRAY_NAME,
              'ops': resolver_ops(model_bytes), 'input_scale': scale,
              'input_zero_point': zero_point, 'tensor_arena_bytes': None}
  try:
    recorded['tensor_arena_bytes'] = measure_arena(model_bytes)
    recorded['measured_with'] = '%s %s' % (
        PACKAGE, importlib.metadata.version(PACKAGE))
  except MicroError as e:
    recorded['arena_not_measured'] = str(e)
  return recorded


def summary(directory, recorded):
  """One line: the C files in `directory`, the model's bytes and the arena
  (`recorded`: what `facts` returned)."""
  arena = recorded['tensor_arena_bytes']
  return 'For TensorFlow Lite Micro: %s (%s, %d bytes); tensor arena %s' % (
      ', '.join(os.path.join(directory, name) for name in recorded['files']),
      recorded['array'], recorded['model_bytes'],
      '%d bytes (%.1f KB; measured with %s)' % (
          arena, arena / 1024, recorded['measured_with'])
      if arena is not None else
      'not measured: %s' % recorded['arena_not_measured'])


# -- TFLM's interpreter, in a child process --------------------------------------
def available():
  """Whether TFLM's Python interpreter can be imported here."""
  return importlib.util.find_spec('tflite_micro') is not None


def _child(command, model_bytes, args=(), inputs=None, timeout=600):
  """Runs this file as a script: `command` on the model; returns
  (CompletedProcess, outputs read back or None)."""
  if not available():
    raise MicroError('%s is not installed (a dev requirement: pip install -r '
                     'requirements.txt)' % PACKAGE)
  with tempfile.TemporaryDirectory(prefix='micro-') as scratch:
    with open(os.path.join(scratch, 'model.tflite'), 'wb') as f:
      f.write(bytes(model_bytes))
    if inputs is not None:
      np.save(os.path.join(scratch, 'inputs.npy'), inputs)
    try:
      result = subprocess.run(
          [sys.executable, os.path.abspath(__file__), command, scratch] +
          [str(a) for a in args], capture_output=True, text=True,
          timeout=timeout)
    except subprocess.TimeoutExpired:
      raise MicroError("TFLM's interpreter did not %s the model within %d s"
                       % (command, timeout)) from None
    outputs = os.path.join(scratch, 'outputs.npz')
    if result.returncode == 0 and os.path.isfile(outputs):
      with np.load(outputs) as loaded:
        return result, [loaded['%d' % i] for i in range(len(loaded.files))]
  return result, None


def _failure(result, what):
  """MicroError naming what failed and why: TFLM's first message (its first
  complaint is the cause, the rest follow from it), else Python's exception,
  else how the child died."""
  stderr = result.stderr.split('Traceback (most recent call last):')
  said = [l.strip() for l in stderr[0].splitlines() if l.strip()]
  raised = stderr[-1].strip().splitlines()[-1:] if len(stderr) > 1 else []
  if said or raised:
    reason = (said or raised)[0]
  elif result.returncode < 0:
    reason = 'it died of %s' % signal.Signals(-result.returncode).name
  else:
    reason = 'exit status %d' % result.returncode
  return MicroError("TFLM's interpreter cannot %s: %s" % (what, reason))


def run_micro(model_bytes, images, arena_size, timeout=600):
  """The outputs of TFLM's interpreter for `images` (an array of the model's
  input type, one image per row, e.g. int8 [N, H, W, C]) with a tensor arena
  of `arena_size` bytes: a list with one array per model output, [N, ...].
  Raises MicroError when the model does not fit the arena or TFLM cannot run
  it."""
  images = np.asarray(images)
  if not len(images):
    raise ValueError('run_micro needs at least one image')
  result, outputs = _child('run', model_bytes, [arena_size], images, timeout)
  if outputs is None:
    raise _failure(result, 'run the model in a %d-byte arena' % arena_size)
  return outputs


def measure_arena(model_bytes, timeout=600):
  """The tensor arena (bytes) TFLM's interpreter needs for the model (module
  doc); raises MicroError when it cannot be measured."""
  result, _ = _child('measure', model_bytes, [PROBE_ARENA], timeout=timeout)
  found = _REPORT.findall(result.stderr)
  if result.returncode != 0 or not found:
    raise _failure(result, 'prepare the model')
  arena = int(found[-1])
  result, outputs = _child('run', model_bytes, [arena], timeout=timeout)
  if outputs is None:  # the report and the allocator disagree
    raise _failure(result, 'run the model in the %d bytes its allocator '
                   'reported' % arena)
  return arena


def _child_main(argv):
  command, scratch, arena_size = argv[0], argv[1], int(argv[2])
  from tflite_micro.python.tflite_micro import runtime
  with open(os.path.join(scratch, 'model.tflite'), 'rb') as f:
    model = f.read()
  interpreter = runtime.Interpreter.from_bytes(model, arena_size=arena_size)
  details = interpreter.get_input_details(0)
  if command == 'measure':
    interpreter.set_input(np.zeros(details['shape'], details['dtype']), 0)
    interpreter.invoke()
    sys.stderr.flush()
    interpreter.print_allocations()  # to stderr, from C++
    return 0
  inputs_path = os.path.join(scratch, 'inputs.npy')
  images = (np.load(inputs_path) if os.path.isfile(inputs_path) else
            np.zeros(details['shape'], details['dtype']))
  outputs = []
  for image in images:
    interpreter.set_input(image[np.newaxis], 0)
    interpreter.invoke()
    row = []
    while True:
      try:
        row.append(interpreter.get_output(len(row)))
      except IndexError:
        break
    outputs.append(row)
  np.savez(os.path.join(scratch, 'outputs.npz'), **{
      '%d' % i: np.concatenate([row[i] for row in outputs])
      for i in range(len(outputs[0]))})
  return 0


if __name__ == '__main__':
  sys.exit(_child_main(sys.argv[1:]))
