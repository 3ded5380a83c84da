"""Downloads happen only when asked, and only the published file is kept.

A local HTTP server on 127.0.0.1 plays the publisher: it serves the whole
file, a file cut short (Content-Length promised, connection closed early) or
other bytes.
"""
import hashlib
import http.server
import os
import threading

import pytest

from datasets import cifar10
from datasets import flowers
from datasets import mnist
from datasets import converters
from datasets import dataset_factory
from datasets import dataset_utils
from test_converters import make_cifar_source


class _Handler(http.server.BaseHTTPRequestHandler):
  def do_GET(self):
    server = self.server
    server.requests.append(self.path)
    body = server.body
    self.send_response(200)
    self.send_header('Content-Length', str(len(body)))
    self.end_headers()
    if server.mode == 'short':
      self.wfile.write(body[:len(body) // 2])
      self.wfile.flush()
      self.close_connection = True  # closes early: fewer bytes than promised
      return
    self.wfile.write(body)

  def log_message(self, *args):
    pass


@pytest.fixture()
def server():
  httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Handler)
  httpd.requests, httpd.body, httpd.mode = [], b'', 'full'
  thread = threading.Thread(target=httpd.serve_forever, daemon=True)
  thread.start()
  httpd.url = 'http://127.0.0.1:%d/' % httpd.server_address[1]
  yield httpd
  httpd.shutdown()
  httpd.server_close()


def _leftovers(directory):
  return [n for n in os.listdir(directory) if n.endswith('.tmp')]


def test_download_cut_short_is_deleted_and_named(server, tmp_path):
  server.body, server.mode = b'x' * 100000, 'short'
  path = str(tmp_path / 'archive.tgz')
  with pytest.raises(dataset_utils.ConversionError) as error:
    dataset_utils.download(server.url + 'archive.tgz', path)
  message = str(error.value)
  assert '\n' not in message
  assert message.startswith('cannot download archive.tgz (%sarchive.tgz: cut short '
                            'at 50000 of 100000 bytes)' % server.url)
  assert 'nothing was kept at %s' % path in message
  assert not os.path.exists(path) and not _leftovers(str(tmp_path))


def test_download_that_is_not_the_published_file_is_deleted(server, tmp_path):
  server.body = b'not the archive'
  path = str(tmp_path / 'archive.tgz')
  published = dataset_utils.Published(md5=hashlib.md5(b'the archive').hexdigest())
  with pytest.raises(dataset_utils.ConversionError, match='md5 %s, the published '
                     'file has %s' % (hashlib.md5(server.body).hexdigest(),
                                      published.md5)):
    dataset_utils.download(server.url + 'archive.tgz', path, published)
  assert not os.path.exists(path) and not _leftovers(str(tmp_path))
  with pytest.raises(dataset_utils.ConversionError, match='15 bytes, the published '
                     'file has 11'):
    dataset_utils.download(server.url + 'a', path, dataset_utils.Published(size=11))


def test_download_of_the_published_file_is_kept(server, tmp_path):
  server.body = b'the archive' * 1000
  path = str(tmp_path / 'archive.tgz')
  published = dataset_utils.Published(
      size=len(server.body), sha256=hashlib.sha256(server.body).hexdigest())
  assert dataset_utils.download(server.url + 'archive.tgz', path, published) == path
  with open(path, 'rb') as f:
    assert f.read() == server.body
  assert not _leftovers(str(tmp_path))


def test_first_mirror_cut_short_then_second_mirror_serves(server, tmp_path):
  other = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Handler)
  other.requests, other.body, other.mode = [], b'y' * 1000, 'short'
  thread = threading.Thread(target=other.serve_forever, daemon=True)
  thread.start()
  try:
    server.body = b'y' * 1000
    path = str(tmp_path / 'f.gz')
    dataset_utils.download(['http://127.0.0.1:%d/f.gz' % other.server_address[1],
                            server.url + 'f.gz'], path)
    assert os.path.getsize(path) == 1000
  finally:
    other.shutdown()
    other.server_close()


def test_nothing_is_downloaded_unless_asked(server, tmp_path, monkeypatch):
  monkeypatch.setattr(cifar10, 'URL', server.url + 'cifar-10-python.tar.gz')
  with pytest.raises(dataset_utils.ConversionError, match='missing .*cifar-10-python'
                     r'.tar.gz; put cifar-10-python.tar.gz in .* or pass --download'):
    converters.convert('cifar10', str(tmp_path))
  assert server.requests == []


def test_cifar10_download_checks_the_checksum_end_to_end(server, tmp_path, monkeypatch):
  make_cifar_source(str(tmp_path / 'publisher'))
  with open(str(tmp_path / 'publisher' / 'cifar-10-python.tar.gz'), 'rb') as f:
    server.body = f.read()
  monkeypatch.setattr(cifar10, 'URL', server.url + 'cifar-10-python.tar.gz')
  monkeypatch.setattr(cifar10, 'PUBLISHED', dataset_utils.Published(
      md5=hashlib.md5(server.body).hexdigest()))
  out = str(tmp_path / 'out')
  server.mode = 'short'
  with pytest.raises(dataset_utils.ConversionError, match='cut short'):
    converters.convert('cifar10', out, download=True)
  assert not os.path.exists(os.path.join(out, 'cifar-10-python.tar.gz'))
  server.mode = 'full'
  assert converters.convert('cifar10', out, download=True) == {'train': 10, 'test': 2}
  assert server.requests == ['/cifar-10-python.tar.gz'] * 2
  assert dataset_factory.get_dataset('cifar10', 'train', out).num_samples == 10


def test_bad_archive_already_in_place_says_it_can_be_deleted(tmp_path):
  archive = str(tmp_path / 'cifar-10-python.tar.gz')
  with open(archive, 'wb') as f:
    f.write(b'\x1f\x8b' + b'\0' * 100)  # what an old, interrupted download left
  with pytest.raises(dataset_utils.ConversionError) as error:
    converters.convert('cifar10', str(tmp_path / 'out'), source_dir=str(tmp_path))
  assert archive in str(error.value) and 'can be deleted' in str(error.value)
  with pytest.raises(dataset_utils.ConversionError, match=(
      '%s is not the published file \\(md5 .*, the published file has '
      'c58f30108f718f92721af3b95e74349a\\); it can be deleted' % archive)):
    converters.convert('cifar10', str(tmp_path / 'out'), source_dir=str(tmp_path),
                       download=True)


def test_published_values_are_the_documented_ones():
  # CIFAR-10: md5 on https://www.cs.toronto.edu/~kriz/cifar.html; flowers and
  # MNIST: TensorFlow Datasets' url_checksums; MNIST sizes: LeCun's page.
  assert cifar10.PUBLISHED.md5 == 'c58f30108f718f92721af3b95e74349a'
  assert flowers.PUBLISHED == dataset_utils.Published(
      228813984, sha256='4c54ace7911aaffe13a365c34f650e71dd5bf1be0a58b464e5a7183e3e595d9c')
  assert {name: p.size for name, p in mnist.PUBLISHED.items()} == {
      'train-images-idx3-ubyte.gz': 9912422, 'train-labels-idx1-ubyte.gz': 28881,
      't10k-images-idx3-ubyte.gz': 1648877, 't10k-labels-idx1-ubyte.gz': 4542}
  assert all(len(p.sha256) == 64 for p in mnist.PUBLISHED.values())
