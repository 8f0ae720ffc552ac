"""LRStreamDataset against a fake server. Uses real torch when installed,
otherwise a minimal stand-in module so the wrapper's logic is still
exercised."""

import os
import socket
import stat
import sys
import tempfile
import textwrap
import threading
import types
import unittest

import msgpack
import numpy as np

import _util  # noqa: F401
from _util import stream

try:
    import torch  # noqa: F401

    REAL_TORCH = True
except ImportError:
    REAL_TORCH = False


def install_fake_torch():
    torch = types.ModuleType("torch")
    torch.from_numpy = lambda a: ("tensor", a)
    utils = types.ModuleType("torch.utils")
    data = types.ModuleType("torch.utils.data")

    class IterableDataset:
        def __init__(self):
            pass

    data.IterableDataset = IterableDataset
    data.get_worker_info = lambda: None
    dist = types.ModuleType("torch.distributed")
    dist.is_available = lambda: False
    torch.utils, utils.data, torch.distributed = utils, data, dist
    sys.modules.update({"torch": torch, "torch.utils": utils, "torch.utils.data": data, "torch.distributed": dist})


def serve_once(path, hellos, payload):
    if os.path.exists(path):
        os.unlink(path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def run():
        conn, _ = srv.accept()
        with conn:
            u = msgpack.Unpacker(raw=False)
            got = None
            while got is None:
                u.feed(conn.recv(4096))
                for m in u:
                    got = m
            hellos.append(got)
            conn.sendall(payload)
        srv.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


class TorchDatasetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.saved = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
        if not REAL_TORCH:
            install_fake_torch()
        sys.modules.pop("lrstream_client.torch_dataset", None)
        import lrstream_client

        cls.LRStreamDataset = lrstream_client.LRStreamDataset

    @classmethod
    def tearDownClass(cls):
        if not REAL_TORCH:
            for k in [k for k in sys.modules if k == "torch" or k.startswith("torch.")]:
                del sys.modules[k]
            sys.modules.update(cls.saved)
        sys.modules.pop("lrstream_client.torch_dataset", None)

    def is_tensor(self, v):
        if REAL_TORCH:
            import torch

            return isinstance(v, torch.Tensor)
        return isinstance(v, tuple) and v[0] == "tensor"

    def test_connect_and_resume(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.sock")
            hellos = []
            t = serve_once(path, hellos, stream(5, 2))
            ds = self.LRStreamDataset(path, rank=1, world_size=2)
            batches = list(ds)
            t.join(5)
            self.assertEqual(hellos, [{"worker": 0, "num_workers": 1, "rank": 1, "world_size": 2}])
            self.assertEqual(len(batches), 3)
            b = batches[0]
            self.assertTrue(self.is_tensor(b["observation.state"]))
            self.assertEqual(b["task"], ["t", "t"])
            self.assertEqual(b["_lrstream"], {"seq": 0, "epoch": 0, "resume": "tok0", "worker": 0, "rank": 1})
            self.assertEqual(ds.state_dict(), {"resume": "tok2"})

            ds2 = self.LRStreamDataset(path, rank=0, world_size=1, meta_key=None)
            ds2.load_state_dict({"resume": "tok1"})
            t = serve_once(path, hellos, stream(1, 1))
            out = list(ds2)
            t.join(5)
            self.assertEqual(hellos[-1]["resume"], "tok1")
            self.assertNotIn("_lrstream", out[0])

    def test_spawn(self):
        # A fake `lrstream` executable: `lrstream serve --socket PATH ...`
        # serves one stream on PATH.
        with tempfile.TemporaryDirectory() as d:
            exe = os.path.join(d, "lrstream")
            args_file = os.path.join(d, "args")
            with open(exe, "w") as f:
                f.write(textwrap.dedent(f"""\
                    #!{sys.executable}
                    import socket, sys, time
                    sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
                    from _util import stream
                    open({args_file!r}, "w").write(" ".join(sys.argv[1:]))
                    time.sleep(0.2)  # the client must wait for the socket
                    path = sys.argv[sys.argv.index("--socket") + 1]
                    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    srv.bind(path)
                    srv.listen(1)
                    conn, _ = srv.accept()
                    conn.recv(4096)
                    conn.sendall(stream(3, 2))
                    conn.close()
                    time.sleep(30)
                    """))
            os.chmod(exe, os.stat(exe).st_mode | stat.S_IEXEC)
            ds = self.LRStreamDataset(serve_args=["--dataset", "x", "--batch-size", "2"], lrstream=exe, connect_timeout=10)
            try:
                self.assertEqual(sum(len(b["task"]) for b in ds), 3)
                with open(args_file) as f:
                    args = f.read().split()
                self.assertEqual(args[0], "serve")
                self.assertEqual(args[3:], ["--dataset", "x", "--batch-size", "2"])
                proc = ds._proc
            finally:
                ds.close()
            self.assertIsNotNone(proc.poll())

    def test_args(self):
        with self.assertRaises(ValueError):
            self.LRStreamDataset()


if __name__ == "__main__":
    unittest.main()
