"""Job logs: progress bars leave one line per redraw and no control characters."""

from __future__ import annotations

import io
import subprocess
import sys

from concord.cli._logs import LineLog


def test_carriage_returns_become_lines_and_escapes_vanish():
    out = io.StringIO()
    log = LineLog(out)
    log.write("start\n\rbar  0%|")
    log.write("\rbar 50%|\x1b[A")
    log.write("\rbar 100%|\n\x1b[1;32mdone\x1b[0m\r\n")
    assert out.getvalue() == "start\nbar  0%|\nbar 50%|\nbar 100%|\ndone\n"
    assert not log.isatty()


def test_a_command_logging_to_a_file_writes_clean_tqdm_lines(tmp_path):
    script = (
        "from concord.cli._logs import quiet_bars\n"
        "quiet_bars()\n"
        "from tqdm.auto import tqdm\n"
        "for _ in tqdm(range(2), desc='outer'):\n"
        "    for _ in tqdm(range(3), desc='inner', leave=False):\n"
        "        pass\n"
    )
    log = tmp_path / "job.log"
    with open(log, "w") as handle:
        subprocess.run([sys.executable, "-c", script], stderr=handle, check=True)
    text = log.read_text()
    assert "\r" not in text and "\x1b" not in text
    assert any(line.startswith("outer: 100%") for line in text.splitlines())
