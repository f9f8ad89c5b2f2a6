"""touchstone_client without a server: rules and tokens files."""

import os
import tempfile
import unittest

import touchstone_client as tc


class GateRulesTest(unittest.TestCase):
    def test_every_key(self):
        r = tc.gate_rules({"baseline": 3, "min": {"eager": 99, "compile": 0},
                           "min_by_task": {"fill-mask": {"train": 50.5}},
                           "max_new_failures": 0, "forbid": ["crash"], "must_pass": ["gpt2"]})
        self.assertEqual(r.baseline_sweep_id, 3)
        self.assertEqual(r.min.eager, 99.0)
        self.assertTrue(r.min.HasField("compile"))
        self.assertFalse(r.min.HasField("train"))
        self.assertEqual(r.min_by_task["fill-mask"].train, 50.5)
        self.assertTrue(r.HasField("max_new_failures"))
        self.assertEqual(list(r.forbid), ["crash"])

    def test_errors_name_the_key(self):
        cases = [({"mni": {}}, "mni: unknown key"),
                 ({"min": {"eagr": 1}}, "min.eagr: unknown key"),
                 ({"min": {"eager": 101}}, "min.eager: must be a number in [0, 100]"),
                 ({"min_by_task": {"x": {"train": True}}}, 'min_by_task["x"].train'),
                 ({"max_new_failures": -1}, "max_new_failures"),
                 ({"forbid": ["crash", ""]}, "forbid: must be a list")]
        for rules, starts in cases:
            with self.assertRaises(ValueError) as e:
                tc.gate_rules(rules)
            self.assertTrue(str(e.exception).startswith(starts), str(e.exception))


class TokenFileTest(unittest.TestCase):
    def write(self, text):
        fd, path = tempfile.mkstemp()
        os.write(fd, text.encode())
        os.close(fd)
        self.addCleanup(os.unlink, path)
        return path

    def test_prefers_reader(self):
        p = self.write("# tokens\nworker w1\nadmin a1\nreader r1\n")
        self.assertEqual(tc.read_token(p), "r1")
        self.assertEqual(tc.read_token(p, roles=("admin",)), "a1")

    def test_bare_token(self):
        self.assertEqual(tc.read_token(self.write("abc\n")), "abc")

    def test_bad_line(self):
        with self.assertRaises(ValueError) as e:
            tc.read_token(self.write("reader r1 extra\n"))
        self.assertIn(":1: expected 'role token'", str(e.exception))


if __name__ == "__main__":
    unittest.main()
