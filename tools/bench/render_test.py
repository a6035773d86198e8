#!/usr/bin/env python3
"""Unit checks of tools/bench/render on the fixture results in tools/bench/testdata/.

The fixture: host example-2c has a full run (2026-01-10) and a later `--only switch` run
(2026-01-11) in which Boost.Fiber's first round failed; host example-16c has a run with
scaling variants (spawn w1..w4, echo c5000w1..w4). Run: python3 tools/bench/render_test.py
"""

import contextlib
import importlib.machinery
import io
import importlib.util
import json
import shutil
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTDATA = HERE / "testdata"
FIXTURES = sorted(TESTDATA.glob("*.json"))


def load_render():
    loader = importlib.machinery.SourceFileLoader("weft_bench_render", str(HERE / "render"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


render = load_render()

README_TEXT = ("# weft\n\nintro\n\n" + render.README_BEGIN + "\nold table\n" + render.README_END +
               "\n\n## After\n")


class RenderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="render-test-"))
        self.readme = self.tmp / "README.md"
        self.readme.write_text(README_TEXT)
        self.out = self.tmp / "docs"

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_render(self, *extra, files=FIXTURES):
        """render's exit status; what it prints is kept in self.said."""
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            rc = render.main(["--out", str(self.out), "--readme", str(self.readme), *extra,
                              *map(str, files)])
        self.said = buf.getvalue()
        return rc

    def page(self):
        return (self.out / "performance.md").read_text()

    def test_same_input_renders_the_same_bytes(self):
        a = render.render(render.load_results(FIXTURES))
        b = render.render(render.load_results(list(reversed(FIXTURES))))
        self.assertEqual(a, b)

    def test_check_passes_after_render_and_fails_after_an_edit(self):
        self.assertEqual(self.run_render(), 0)
        self.assertEqual(self.run_render("--check"), 0)
        page = self.out / "performance.md"
        page.write_text(page.read_text() + "hand edit\n")
        self.assertEqual(self.run_render("--check"), 1)
        self.assertIn("performance.md differs from what the data renders", self.said)

    def test_check_flags_a_stale_svg_and_render_removes_it(self):
        self.assertEqual(self.run_render(), 0)
        stale = self.out / "perf" / "gone-host-micro.svg"
        stale.write_text("<svg/>")
        self.assertEqual(self.run_render("--check"), 1)
        self.assertEqual(self.run_render(), 0)
        self.assertFalse(stale.exists())

    def test_cells_show_median_and_range_and_failures(self):
        self.run_render()
        page = self.page()
        # switch comes from the newer --only run; Boost.Fiber's first round failed there.
        self.assertIn("| - | `ns_per_switch` (ns) | 12.2 (12.0–12.5) | 61.0 (60.0–62.0) | "
                      "46.8 (46.5–47.0) ! | 5.00 (5.00–5.10) | 0.20 | 0.26 | 2.44 |", page)
        self.assertNotIn("13.5 (13.0–14.0)", page)  # the older run's switch row is replaced
        # raw epoll's idle_conns runs all failed: n/a, and no ratio.
        self.assertIn("| c15000 | `bytes_per_conn` (B) | 1096 (1090–1100) | 1200 (1190–1210) | "
                      "3562 (3560–3570) | n/a | 0.31 | – | 0.34 | – |", page)

    def test_each_table_names_its_run(self):
        self.run_render()
        page = self.page()
        self.assertIn("From `tools/bench/testdata/2026-01-11-example-2c.json`, host example-2c, "
                      "run 2026-01-11, commit 0123456789, load average at the start 0.08, at the "
                      "end 0.38, 3 rounds.", page)
        self.assertIn("From `tools/bench/testdata/2026-01-10-example-2c.json`", page)

    def test_scaling_section_and_plots(self):
        self.run_render()
        page = self.page()
        self.assertIn("### Scaling on example-16c", page)
        self.assertIn("| c5000w4 | `ns_per_req` (ns) | 2100 | 2580 | 0.81 |", page)
        # spawn w1 is in compare's plan anyway: its own table has it, and so does the series.
        scaling = page[page.index("### Scaling on example-16c"):]
        self.assertIn("| w1 | `ns_per_spawn` (ns) | 130.0 | 1173 | 0.11 |", scaling)
        self.assertIn("| w4 | `ns_per_spawn` (ns) | 435.0 | 525.0 | 0.83 |", scaling)
        results = page[page.index("## Results on example-16c"):page.index("## Scaling")]
        self.assertIn("| w1 | `ns_per_spawn` (ns) | 130.0 | 1173 | – | 0.11 | – |", results)
        self.assertNotIn("| w4 |", results)
        names = sorted(p.name for p in (self.out / "perf").glob("*.svg"))
        self.assertEqual(names, ["example-16c-micro.svg", "example-16c-scaling.svg",
                                 "example-2c-echo-latency.svg", "example-2c-micro.svg",
                                 "example-2c-net.svg"])
        for name in names:
            self.assertIn(f"(perf/{name})", page)
            root = ET.parse(self.out / "perf" / name).getroot()  # well-formed
            self.assertEqual(root.tag, "{http://www.w3.org/2000/svg}svg")

    def test_without_scaling_runs_the_page_says_how_to_make_one(self):
        self.run_render(files=FIXTURES[:2])
        page = self.page()
        self.assertIn("No results file has scaling runs yet", page)
        self.assertIn("--scaling 1,2,4,8,16", page)

    def test_readme_changes_between_the_markers_only(self):
        self.run_render()
        text = self.readme.read_text()
        before, rest = text.split(render.README_BEGIN)
        block, after = rest.split(render.README_END)
        self.assertEqual(before, "# weft\n\nintro\n\n")
        self.assertEqual(after, "\n\n## After\n")
        self.assertNotIn("old table", block)
        self.assertIn("| switch (ns) | 12.2 | 61.0 | 46.8 | 5.00 | 0.20 |", block)
        self.assertIn("| idle connection (bytes of server RSS) | 1096 | 3562 | – | – | 0.31 |",
                      block)
        self.assertIn("(docs/performance.md)", block)

    def test_a_readme_without_markers_is_left_alone(self):
        self.readme.write_text("# weft\n\nno markers\n")
        self.assertEqual(self.run_render(), 0)
        self.assertEqual(self.readme.read_text(), "# weft\n\nno markers\n")
        self.assertIn("has no <!-- perf-table:begin --> ... <!-- perf-table:end --> markers",
                      self.said)
        self.assertEqual(self.run_render("--check"), 0)

    def test_a_loaded_or_quick_run_is_marked(self):
        doc = json.loads(FIXTURES[1].read_text())
        doc["meta"]["loadavg_start"] = [1.5, 1.0, 0.5]
        doc["meta"]["quick"] = True
        loaded = self.tmp / "2026-01-11-example-2c.json"
        loaded.write_text(json.dumps(doc))
        self.run_render(files=[FIXTURES[0], loaded])
        page = self.page()
        self.assertIn("A `--quick` run (tiny sizes): these figures do not count.", page)
        self.assertIn("The machine was not quiet (load average 1 or more as the run started)",
                      page)

    def test_a_schema_1_file_renders(self):
        # compare before schema 2: no host, started, machine, git; no failed/scaling per row.
        doc = json.loads(FIXTURES[0].read_text())
        for key in ("schema", "started", "host", "machine", "git", "toolchain", "command", "only",
                    "scaling", "scaling_benches"):
            del doc["meta"][key]
        for row in doc["medians"]:
            del row["failed"], row["scaling"]
        old = self.tmp / "2025-12-01-oldhost.json"
        old.write_text(json.dumps(doc))
        self.assertEqual(self.run_render(files=[old]), 0)
        page = self.page()
        self.assertIn("## Results on oldhost", page)
        self.assertIn("From `2025-12-01-oldhost.json`, host oldhost, run 2026-01-10, load average "
                      "at the start 0.12, at the end 0.42, 3 rounds.", page)
        self.assertIn("No results file has scaling runs yet", page)
        self.assertIn("| 3562 (3560–3570) | n/a |", page)  # raw epoll's failed runs, from runs

    def test_not_a_results_file_is_an_error(self):
        bad = self.tmp / "bad.json"
        bad.write_text("{}")
        self.assertEqual(self.run_render(files=[bad]), 2)
        self.assertIn("not a compare results file", self.said)
        self.assertFalse((self.out / "performance.md").exists())


if __name__ == "__main__":
    unittest.main()
