"""Where the bytes of an int8 TFLite model go, and what each part of
serving/micro.slim_for_micro saves: what TensorFlow Lite Micro's interpreter
never reads.

    python benchmarks/micro_model_bytes.py MODEL.tflite [MODEL.tflite ...]

For each model: its bytes, weights and biases (buffer data), the names of
its tensors, its quantization parameters, metadata; then the bytes saved by
leaving out each part alone (the other parts kept), and by all but the
probabilities output together (slim_for_micro, what export_model.py's int8
exports leave out). A model already slimmed saves nothing more.
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import flatbuffers  # noqa: E402
from tensorflow.lite.python import schema_py_generated as schema  # noqa: E402

from serving import micro  # noqa: E402


def _model(model_bytes):
  return schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(model_bytes, 0))


def _pack(model):
  builder = flatbuffers.Builder(1024)
  builder.Finish(model.Pack(builder), file_identifier=b'TFL3')
  return bytes(builder.Output())


def _inner_names(model):
  graph = model.subgraphs[0]
  io = set(graph.inputs) | set(graph.outputs)
  for i, tensor in enumerate(graph.tensors):
    if i not in io:
      tensor.name = None


def _description(model):
  model.description = None
  model.subgraphs[0].name = None


def _signature_defs(model):
  model.signatureDefs = None


def _metadata(model):
  for entry in model.metadata or []:
    if entry.name.decode() not in micro.MICRO_METADATA:
      model.buffers[entry.buffer].data = None
  model.metadata = [m for m in model.metadata or []
                    if m.name.decode() in micro.MICRO_METADATA] or None


def _probabilities(model):
  graph = model.subgraphs[0]
  graph.outputs = [i for i in graph.outputs
                   if graph.tensors[i].name != b'probabilities']
  micro._drop_unused(model, graph)  # pylint: disable=protected-access


PARTS = [
    ('tensor names (all but the input and outputs)', _inner_names),
    ('description and subgraph name', _description),
    ('signature defs', _signature_defs),
    ('metadata (min_runtime_version, CONVERSION_METADATA)', _metadata),
    ('the probabilities output (its SOFTMAX, tensor, op code)',
     _probabilities),
]


def describe(path):
  with open(path, 'rb') as f:
    model_bytes = f.read()
  model = _model(model_bytes)
  graph = model.subgraphs[0]
  data = sum(len(b.data) for b in model.buffers if b.data is not None)
  names = sum(len(t.name or b'') for t in graph.tensors)
  quant = sum(len(q.scale if q.scale is not None else []) * 4 +
              len(q.zeroPoint if q.zeroPoint is not None else []) * 8
              for q in (t.quantization for t in graph.tensors) if q)
  print('%s: %d bytes; %d tensors, %d ops, %d buffers' % (
      path, len(model_bytes), len(graph.tensors), len(graph.operators),
      len(model.buffers)))
  print('  weights and biases (buffer data) %d bytes; tensor names %d; '
        'quantization scales and zero points %d; metadata %s' % (
            data, names, quant,
            ', '.join('%s (%d bytes)' % (m.name.decode(), len(
                model.buffers[m.buffer].data if model.buffers[m.buffer].data
                is not None else [])) for m in model.metadata or []) or
            'none'))
  repacked = len(_pack(model))
  for what, leave_out in PARTS:
    model = _model(model_bytes)
    leave_out(model)
    print('  without %s: saves %d bytes' % (what,
                                            repacked - len(_pack(model))))
  slim = micro.slim_for_micro(model_bytes)
  print('  all but the probabilities (micro.slim_for_micro, what '
        'export_model.py writes): %d bytes, saves %d' % (
            len(slim), len(model_bytes) - len(slim)))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('models', nargs='+')
  for path in parser.parse_args().models:
    describe(path)


if __name__ == '__main__':
  main()
