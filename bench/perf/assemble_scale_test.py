#!/usr/bin/python3
"""Unit tests of assemble_scale.py's growth fit and classes, and of its
folding of grid points (RSS per pending gang against the 0-pending point,
the median of repeats). Standard library only."""
import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import assemble  # noqa: E402
import assemble_scale  # noqa: E402

SIZES = (10_000, 100_000, 1_000_000)


class GrowthTest(unittest.TestCase):
    def classify(self, f):
        return assemble_scale.growth_class(
            assemble_scale.growth_exponent([(x, f(x)) for x in SIZES]))

    def test_classes(self):
        self.assertEqual(self.classify(lambda x: 5.0), "constant")
        self.assertEqual(self.classify(lambda x: math.log(x)), "constant")
        self.assertEqual(self.classify(lambda x: math.log(x) ** 3), "log")
        self.assertEqual(self.classify(lambda x: 3e-6 * x), "linear")
        self.assertEqual(self.classify(lambda x: x * math.log(x)), "linear")
        self.assertEqual(self.classify(lambda x: x ** 1.5), "superlinear")

    def test_exponent_of_a_power(self):
        k = assemble_scale.growth_exponent([(x, 2 * x ** 0.7) for x in SIZES])
        self.assertAlmostEqual(k, 0.7)

    def test_unusable_points(self):
        self.assertIsNone(assemble_scale.growth_exponent([(10, 1.0)]))
        self.assertIsNone(
            assemble_scale.growth_exponent([(10, None), (100, 0), (1000, 2)]))
        self.assertEqual(assemble_scale.growth_class(None), "not measured")


class FoldTest(unittest.TestCase):
    def test_rss_per_pending_gang_and_median(self):
        with tempfile.TemporaryDirectory() as raw:
            def write(name, data):
                with open(os.path.join(raw, name), "w") as f:
                    json.dump(data, f)
            write("core-1000-0-1.json", {"rss_bytes": 1000})
            for r, (rss, rate) in enumerate(((5000, 10.0), (3000, 30.0),
                                             (4000, 20.0)), 1):
                write(f"core-1000-10-{r}.json",
                      {"rss_bytes": rss, "churn": {"admissions_per_sec": rate}})
            points = assemble_scale.core_points(raw)
        self.assertEqual(points[(1000, 10)]["repeats"], 3)
        self.assertEqual(points[(1000, 10)]["churn_admissions_per_sec"], 20.0)
        self.assertEqual(points[(1000, 10)]["rss_bytes_per_pending_gang"], 300)
        self.assertIsNone(points[(1000, 0)]["rss_bytes_per_pending_gang"])


class RefreshScaleTest(unittest.TestCase):
    def test_names_the_new_grid_and_keeps_the_rest(self):
        with tempfile.TemporaryDirectory() as out:
            def write(name, text):
                with open(os.path.join(out, name), "w") as f:
                    f.write(text)
            write("latest.json", json.dumps(
                {"meta": {"commit": "run1"}, "x": 1,
                 "scale": {"commit": "old"}}))
            write("latest.md", "| figure |\n\nScale grid (`bench/run.sh "
                  "--scale`, commit old, then): 3 superlinear terms "
                  "(goal 0); figures and growth rates in scale.md.\n")
            write("scale.json", json.dumps(
                {"commit": "new", "date": "d", "mode": "full",
                 "superlinear_terms": 0}))
            assemble.refresh_scale(out)
            with open(os.path.join(out, "latest.json")) as f:
                latest = json.load(f)
            with open(os.path.join(out, "latest.md")) as f:
                md = f.read()
        self.assertEqual(latest["meta"], {"commit": "run1"})
        self.assertEqual(latest["x"], 1)
        self.assertEqual(latest["scale"]["commit"], "new")
        self.assertTrue(md.startswith("| figure |\n"))
        self.assertEqual(md.count("Scale grid"), 1)
        self.assertIn("commit new, d): 0 superlinear terms", md)


if __name__ == "__main__":
    unittest.main()
