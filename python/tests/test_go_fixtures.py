"""Checks streams written by the Go sinks (sink/python_test.go sets
LRSTREAM_FIXTURES to a directory holding them)."""

import json
import os
import unittest

import numpy as np

import _util  # noqa: F401
import lrstream_client as lc

FIXTURES = os.environ.get("LRSTREAM_FIXTURES")


def jsonl_floats(v):
    """Map non-finite floats to the strings the JSONL sink writes."""
    if isinstance(v, float) and v != v:
        return "NaN"
    if v == float("inf"):
        return "Infinity"
    if v == float("-inf"):
        return "-Infinity"
    if isinstance(v, list):
        return [jsonl_floats(e) for e in v]
    if isinstance(v, dict):
        return {k: jsonl_floats(e) for k, e in v.items()}
    return v


@unittest.skipUnless(FIXTURES, "LRSTREAM_FIXTURES not set (run via go test ./sink)")
class GoFixturesTest(unittest.TestCase):
    def path(self, name):
        return os.path.join(FIXTURES, name)

    def test_stream_matches_jsonl(self):
        with open(self.path("stream.jsonl")) as f:
            lines = [json.loads(l) for l in f]
        r = lc.StreamReader(self.path("stream.msgpack"))
        h = r.header
        self.assertEqual(h, {**lines[0], "tools": h["tools"], "options": h["options"]})
        self.assertEqual(h["tools"], lines[0]["tools"])
        self.assertEqual(list(h["tools"][0]["function"]), ["name", "description", "parameters"])
        feats = {f["name"]: f for f in h["features"]}
        batches = list(r)
        self.assertEqual(len(batches), len(lines) - 2)
        kept = [i for i in range(100) if i % 7 != 6]
        seen = []
        for b, want in zip(batches, lines[1:-1]):
            self.assertEqual((b.seq, b.epoch, b.size, b.resume), (want["seq"], want["epoch"], want["size"], want["resume"]))
            self.assertEqual(list(b), list(want["columns"]))
            for name, v in want["columns"].items():
                got = b[name]
                if name in feats:
                    self.assertIsInstance(got, np.ndarray, name)
                    self.assertEqual(got.dtype, np.dtype(feats[name]["dtype"]), name)
                    self.assertEqual(got.shape, (b.size, *feats[name]["shape"]), name)
                    np.testing.assert_array_equal(got, np.array(v, dtype=got.dtype), err_msg=name)
                else:
                    self.assertEqual(jsonl_floats(got), v, name)
            seen.extend(b["index"].tolist())
            st = b["observation.state"]
            np.testing.assert_array_equal(st[:, 3], b["index"].astype(np.float32) + np.float32(0.03))
            for i, msgs in zip(b["index"].tolist(), b["messages"]):
                self.assertEqual([m["role"] for m in msgs][:4], ["user", "assistant", "user", "assistant"])
                self.assertTrue(msgs[0]["content"].endswith("(frame %d) — ünïcødé 🤖 \"quoted\" <tag>" % i))
                if i % 3 == 0:
                    self.assertEqual(list(msgs[4]), ["role", "tool_calls"])
                    args = msgs[4]["tool_calls"][0]["function"]["arguments"]
                    self.assertEqual(list(args), ["text", "z", "a"])
                    self.assertEqual(args["a"][:2], [1.5, -2])
                    self.assertEqual(args["a"][2], float("inf"))
                else:
                    self.assertEqual(len(msgs), 4)
            for rows in b["language_persistent"]:
                self.assertEqual(list(rows[0]), ["role", "content", "style", "timestamp", "camera", "tool_calls"])
        self.assertEqual(seen, kept)
        self.assertEqual(r.end["samples"], len(kept))
        self.assertEqual(r.end["components"], lines[-1]["components"])

    def test_msgpack_numpy(self):
        try:
            import msgpack
            import msgpack_numpy
        except ImportError:
            self.skipTest("msgpack_numpy not installed")
        with open(self.path("stream.msgpack"), "rb") as f:
            msgs = list(msgpack.Unpacker(f, object_hook=msgpack_numpy.decode, raw=False))
        cols = msgs[1]["columns"]
        self.assertIsInstance(cols["action"], np.ndarray)
        self.assertEqual(cols["action"].shape, (16, 14))
        self.assertEqual(cols["observation.grid"].dtype, np.int32)
        self.assertEqual(cols["observation.flag"].dtype, np.bool_)

    def test_truncated(self):
        with self.assertRaises(lc.TruncatedStreamError):
            list(lc.StreamReader(self.path("truncated.msgpack")))

    def test_error(self):
        r = lc.StreamReader(self.path("error.msgpack"))
        self.assertEqual(r.header["dataset"], "x")
        with self.assertRaisesRegex(lc.StreamError, "episode 7 frame 3: boom"):
            list(r)


if __name__ == "__main__":
    unittest.main()
