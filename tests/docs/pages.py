"""What the documentation tests read from the pages."""

from __future__ import annotations

import re


def shell_lines(text: str) -> list[str]:
    """The lines of the ```sh blocks, in order, with trailing `# comments` dropped."""
    lines = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines
